// Builds the UI into dist/: app.js and app.css (bundled and minified by esbuild), index.html naming
// them with a hash of their content, and a gzip copy of each, which the binary embeds and serves to
// browsers that accept it. The output depends only on the sources and the locked packages, so CI can
// rebuild it and require that it equals what is committed (what the binary embeds).
import * as esbuild from 'esbuild';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync, mkdirSync, rmSync } from 'node:fs';
import { gzipSync, constants } from 'node:zlib';

const out = 'dist';
rmSync(out, { recursive: true, force: true });
mkdirSync(out);
const result = await esbuild.build({
  entryPoints: { app: 'src/main.js' },
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['chrome100', 'firefox100', 'safari15'],
  outdir: out,
  write: false,
  legalComments: 'eof',
  charset: 'utf8',
  logLevel: 'warning',
});
const files = {};
for (const f of result.outputFiles) files[f.path.slice(f.path.lastIndexOf('/') + 1)] = f.contents;
const hash = (b) => createHash('sha256').update(b).digest('hex').slice(0, 16);
const html = readFileSync('index.html', 'utf8').replace('__JS_HASH__', hash(files['app.js'])).replace('__CSS_HASH__', hash(files['app.css']));
files['index.html'] = Buffer.from(html);
let total = 0;
for (const [name, bytes] of Object.entries(files).sort()) {
  writeFileSync(`${out}/${name}`, bytes);
  // gzip at level 9 with no file name and a zero mtime: the same input always gives the same bytes.
  const gz = gzipSync(bytes, { level: constants.Z_BEST_COMPRESSION });
  writeFileSync(`${out}/${name}.gz`, gz);
  total += gz.length;
  console.log(`${out}/${name}: ${bytes.length} bytes, ${gz.length} gzipped`);
}
console.log(`total gzipped: ${total} bytes`);
