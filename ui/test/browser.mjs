// Tessera's UI in a real headless browser (Debian's Chromium, driven by playwright-core), against a live
// server holding data. Run by crates/server/tests/ui_browser.rs (which starts the server and writes the
// data), or by hand:
//   node test/browser.mjs --url http://127.0.0.1:9090 --out /tmp/shots --metric M --top-metric T --label L
// where M is a metric with samples over the last hour, T the metric with the most series, L a label of M.
// Every check throws on failure (exit code 1); screenshots of each page go to --out.
import { chromium } from 'playwright-core';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), [])
);
const base = args.url;
const out = args.out || 'screenshots';
const metric = args.metric;
const topMetric = args['top-metric'];
const label = args.label;
assert.ok(base && metric && topMetric && label, 'usage: --url URL --out DIR --metric M --top-metric T --label L');
mkdirSync(out, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
});
const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
const page = await context.newPage();
const consoleErrors = [];
// Errors in the console, but for the 400s the linter's parse_query requests get for invalid text.
page.on('console', (m) => m.type() === 'error' && !/\/api\/v1\/parse_query/.test(m.location().url || '') && consoleErrors.push(`${m.text()} (${m.location().url})`));
page.on('pageerror', (e) => consoleErrors.push(String(e)));
const offsite = [];
page.on('request', (r) => {
  const u = r.url();
  if (!u.startsWith(base) && !u.startsWith('data:')) offsite.push(u);
});
const results = {};
const step = async (name, f) => {
  const t0 = Date.now();
  await f();
  console.log(`ok   ${name} (${Date.now() - t0} ms)`);
};
const shot = (name) => page.screenshot({ path: `${out}/${name}.png`, fullPage: true });
const editorAt = (i) => page.locator('.panel').nth(i).locator('.cm-content');
// Coloured pixels in a chart's canvas (the series' lines; axes, grid and text are grey or black), polled
// for up to 5 s until more than 100 are drawn.
const colouredPixels = async (canvas) => {
  let n = 0;
  for (let i = 0; i < 50 && n <= 100; i++) {
    await page.waitForTimeout(100);
    n = await canvas.evaluate((c) => {
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let k = 0;
      for (let j = 0; j < d.length; j += 4) {
        if (d[j + 3] > 100 && Math.max(d[j], d[j + 1], d[j + 2]) - Math.min(d[j], d[j + 1], d[j + 2]) > 60) k++;
      }
      return k;
    });
  }
  return n;
};
// Runs panel i and waits for its new result (not the previous one still on the page).
const runPanel = async (i) => {
  const panel = page.locator('.panel').nth(i);
  await panel.locator('.result').evaluate((r) => (r.dataset.state = 'stale'));
  await panel.locator('button.execute').click();
  await panel.locator('.result[data-state="done"], .result[data-state="error"]').waitFor({ timeout: 10_000 });
  return panel;
};
const typeQuery = async (i, text) => {
  await editorAt(i).click();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Delete');
  await page.keyboard.type(text, { delay: 5 });
};

try {
  await step('the query page loads at / (redirect), its assets within 1 MB compressed, interactive', async () => {
    const assets = [];
    const onResp = (r) => {
      const type = r.request().resourceType();
      if (['document', 'script', 'stylesheet'].includes(type) && r.status() !== 302) assets.push(r);
    };
    page.on('response', onResp);
    await page.goto(`${base}/`, { waitUntil: 'load' });
    await page.waitForFunction(() => window.__tesseraReady !== undefined, null, { timeout: 10_000 });
    page.off('response', onResp);
    assert.equal(new URL(page.url()).pathname, '/query');
    let bytes = 0;
    for (const r of assets) {
      const sizes = await r.request().sizes();
      bytes += sizes.responseBodySize;
      assert.equal(r.status(), 200, `${r.url()} answered ${r.status()}`);
      assert.equal((await r.allHeaders())['content-encoding'], 'gzip', `${r.url()} was not sent compressed`);
    }
    const readyMs = await page.evaluate(() => window.__tesseraReady);
    const nav = await page.evaluate(() => performance.getEntriesByType('navigation')[0].toJSON());
    results.assetBytes = bytes;
    results.readyMs = Math.round(readyMs);
    results.domContentLoadedMs = Math.round(nav.domContentLoadedEventEnd);
    assert.ok(assets.length >= 3, `expected the page, its script and stylesheet, saw ${assets.map((a) => a.url())}`);
    assert.ok(bytes <= 1_000_000, `page weight ${bytes} bytes compressed (limit 1 MB)`);
    console.log(`     page weight ${bytes} bytes compressed; interactive ${results.readyMs} ms after navigation start`);
  });

  await step('an instant query shows a table of its series', async () => {
    await typeQuery(0, metric);
    await page.keyboard.press('Escape');
    await runPanel(0);
    const rows = page.locator('.panel').nth(0).locator('table.data tr');
    await rows.first().waitFor({ timeout: 10_000 });
    assert.ok((await rows.count()) >= 1);
    const text = await page.locator('.panel').nth(0).locator('table.data').innerText();
    assert.ok(text.includes(`${metric}{`), text.slice(0, 300));
    const stats = await page.locator('.panel').nth(0).locator('.stats').innerText();
    assert.match(stats, /Load time: \d+ ms/);
    assert.match(stats, /Samples: [\d,]+ queried/);
    await shot('query-table');
  });

  if (args.histogram) {
    await step('a native histogram shows its count, sum and buckets in the table', async () => {
      await typeQuery(0, args.histogram);
      await page.keyboard.press('Escape');
      await runPanel(0);
      const h = page.locator('.panel').nth(0).locator('details.histogram');
      await h.waitFor({ timeout: 10_000 });
      await h.locator('summary').click();
      const text = await h.innerText();
      // The newest sample of the test's histogram: 240 scrapes in, 1,440 observations, buckets 240/480/720.
      assert.match(text, /count: 1440, sum: 2160, 3 buckets/, text);
      assert.match(text, /\(0\.5, 1\]\s+240/, text);
      assert.match(text, /\(1, 2\]\s+480/, text);
      assert.match(text, /\(2, 4\]\s+720/, text);
      await shot('histogram');
    });
  }

  await step('an info annotation is shown as Prometheus shows it', async () => {
    // rate() over a metric whose name does not say it is a counter: Prometheus' info annotation.
    await typeQuery(0, `rate(${topMetric}[5m])`);
    await page.keyboard.press('Escape');
    await runPanel(0);
    const info = page.locator('.panel').nth(0).locator('.alert.info');
    await info.waitFor({ timeout: 10_000 });
    assert.match(await info.innerText(), /PromQL info: metric might not be a counter, name does not end in _total\/_sum\/_count\/_bucket: "/);
    await typeQuery(0, metric);
    await page.keyboard.press('Escape');
    await runPanel(0);
    await page.locator('.panel').nth(0).locator('table.data').waitFor({ timeout: 10_000 });
  });

  await step('a range query draws a graph (the canvas is not blank) with a legend of label sets', async () => {
    await page.locator('.panel').nth(0).locator('button[data-tab="graph"]').click();
    const canvas = page.locator('.panel').nth(0).locator('.uplot canvas');
    await canvas.waitFor({ timeout: 10_000 });
    const colored = await colouredPixels(canvas);
    if (colored <= 100) await shot('query-graph-blank');
    assert.ok(colored > 100, `only ${colored} coloured pixels: the graph is blank`);
    const legend = await page.locator('.panel').nth(0).locator('.u-legend').innerText();
    assert.ok(legend.includes(`${label}=`), legend.slice(0, 300));
    // The panel's state is in the URL in Prometheus' parameters (written at most every 300 ms).
    await page.waitForFunction(() => new URL(location.href).searchParams.get('g0.tab') === '0', null, { timeout: 5_000 });
    const url = new URL(page.url());
    assert.equal(url.searchParams.get('g0.expr'), metric);
    await shot('query-graph');
    // Hovering shows values in the legend.
    const box = await canvas.boundingBox();
    await page.mouse.move(box.x + box.width * 0.8, box.y + box.height / 2);
    const live = await page.locator('.panel').nth(0).locator('.u-legend .u-value').nth(1).innerText();
    assert.ok(live !== '' && live !== '--', `hover value: ${live}`);
    // Dragging across the graph zooms into that range (re-queried, range shrinks).
    await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2, { steps: 5 });
    await page.mouse.up();
    await page.waitForFunction(() => new URL(location.href).searchParams.get('g0.end_input') !== null, null, { timeout: 10_000 });
    const range = new URL(page.url()).searchParams.get('g0.range_input');
    assert.notEqual(range, '1h', 'zoom did not narrow the range');
    await page.locator('.panel').nth(0).locator('.result[data-state="done"] .uplot canvas').waitFor({ timeout: 10_000 });
    // A Prometheus link's range, end and resolution arrive in the panel's inputs, and back in the URL.
    await page.goto(`${base}/graph?g0.expr=${encodeURIComponent(metric)}&g0.tab=0&g0.range_input=2h&g0.end_input=${encodeURIComponent('2030-01-02 03:04:05')}&g0.step_input=60&g0.stacked=1`);
    await page.locator('.panel .result[data-state="done"]').waitFor({ timeout: 10_000 });
    assert.ok(await page.locator('.panel .tab.active[data-tab="graph"]').count(), 'tab=0 is the graph');
    assert.equal(await page.locator('.panel input.range').inputValue(), '2h');
    assert.equal(await page.locator('.panel input.time').nth(0).inputValue(), '2030-01-02 03:04:05');
    assert.equal(await page.locator('.panel input.step').inputValue(), '60');
    assert.ok(await page.locator('.panel input[type=checkbox]').isChecked(), 'stacked');
    await page.waitForFunction(() => new URL(location.href).searchParams.get('g0.range_input') === '2h', null, { timeout: 5_000 });
    const u = new URL(page.url()).searchParams;
    assert.deepEqual([u.get('g0.tab'), u.get('g0.end_input'), u.get('g0.step_input'), u.get('g0.stacked')], ['0', '2030-01-02 03:04:05', '60', '1']);
    // NaN and ±Inf (0/0 at the counters' first samples, x/0 after) leave gaps, not a blank graph.
    await page.goto(`${base}/query?g0.expr=${encodeURIComponent(`(${metric} / ${metric}) * ${metric}`)}&g0.tab=0`);
    await page.locator('.panel .result[data-state="done"] .uplot canvas').waitFor({ timeout: 10_000 });
    const withNaN = await colouredPixels(page.locator('.panel .uplot canvas'));
    assert.ok(withNaN > 100, 'a series starting with NaN blanked the graph');
  });

  await step('autocompletion offers a metric name that exists', async () => {
    await page.locator('#add-panel').click();
    await editorAt(1).click();
    await page.keyboard.type(metric.slice(0, metric.length - 2), { delay: 20 });
    const option = page.locator('.cm-tooltip-autocomplete li', { hasText: metric }).first();
    await option.waitFor({ timeout: 10_000 });
    await shot('autocomplete');
    await page.keyboard.press('Escape');
  });

  await step('an invalid query shows the parser message, inline and under the panel', async () => {
    // (Typed as a user would; the editor closes brackets by itself, so the error is a missing operand.)
    const bad = `sum(rate(${metric}[5m])) by (${label}) /`;
    const want = await (await fetch(`${base}/api/v1/parse_query?query=${encodeURIComponent(bad)}`)).json();
    assert.equal(want.status, 'error');
    const parserMsg = want.error.replace(/^invalid parameter "query": /, '');
    await typeQuery(1, bad);
    assert.equal(await editorAt(1).innerText(), bad);
    const lint = page.locator('.panel').nth(1).locator('.cm-lintRange-error');
    await lint.first().waitFor({ timeout: 10_000 });
    await page.locator('.panel').nth(1).locator('button.execute').click();
    const err = page.locator('.panel').nth(1).locator('.alert.error');
    await err.waitFor({ timeout: 10_000 });
    const msg = await err.innerText();
    assert.ok(msg.includes(parserMsg), `${msg} lacks the parser's ${parserMsg}`);
    await lint.first().hover();
    const tip = page.locator('.cm-tooltip-lint');
    await tip.waitFor({ timeout: 5_000 });
    assert.ok((await tip.innerText()).includes(parserMsg), await tip.innerText());
    await shot('invalid-query');
  });

  await step('a Prometheus /graph?g0.expr= link opens with that query', async () => {
    const expr = `sum by (${label}) (${metric})`;
    await page.goto(`${base}/graph?g0.expr=${encodeURIComponent(expr)}&g0.tab=0&g0.range_input=30m`);
    await page.locator('.panel .tab.active[data-tab="graph"]').waitFor({ timeout: 10_000 });
    await page.goto(`${base}/graph?g0.expr=${encodeURIComponent(expr)}&g0.tab=1&g0.range_input=30m`);
    await page.locator('.panel .cm-content').first().waitFor();
    assert.equal(await page.locator('.panel .cm-content').first().innerText(), expr);
    assert.equal(new URL(page.url()).pathname, '/query');
    await page.locator('.panel table.data tr').first().waitFor({ timeout: 10_000 });
    assert.ok(await page.locator('.panel .tab.active[data-tab="table"]').count(), 'tab=1 is the table');
  });

  await step('the explain view shows the plan with per-node figures', async () => {
    const expr = `sum by (${label}) (rate(${metric}[5m]))`;
    await page.goto(`${base}/query?g0.expr=${encodeURIComponent(expr)}&g0.tab=explain`);
    const node = page.locator('.plan-node').first();
    await node.waitFor({ timeout: 10_000 });
    const text = await page.locator('.explain').innerText();
    assert.match(text, /Total: [\d.]+ ms/);
    assert.match(text, /\bsum\b/);
    assert.match(text, /samples [\d,]+/);
    assert.match(text, /shards/);
    assert.ok((await page.locator('.plan-node').count()) >= 2, 'expected the aggregation and what it aggregates');
    await shot('explain');
  });

  await step('the cardinality page lists the metric with most series first', async () => {
    await page.goto(`${base}/cardinality`);
    const first = page.locator('#metrics-by-series tr td.name').first();
    await first.waitFor({ timeout: 10_000 });
    assert.equal(await first.innerText(), topMetric);
    assert.ok(Number((await page.locator('#head-series').innerText()).replace(/,/g, '')) > 0);
    await shot('cardinality');
  });

  await step('explore lists metrics with metadata, a metric shows its labels, a value builds a query', async () => {
    await page.goto(`${base}/explore`);
    const row = page.locator(`tr.metric-row[data-metric="${metric}"]`);
    await row.waitFor({ timeout: 10_000 });
    assert.match(await row.innerText(), /counter/);
    await row.locator('td').nth(2).click();
    const chip = page.locator('.metric-detail a.chip').first();
    await chip.waitFor({ timeout: 10_000 });
    assert.match(await page.locator('.metric-detail').innerText(), new RegExp(label));
    await shot('explore');
    await chip.click();
    await page.waitForURL(/\/query\?/);
    assert.match(await page.locator('.panel .cm-content').first().innerText(), new RegExp(`^${metric}\\{`));
    await page.locator('.panel .result[data-state="done"] table.data tr').first().waitFor({ timeout: 10_000 });
    if (args['odd-label']) {
      // A label value with quotes, a backslash and non-ASCII letters: the query built from it selects it.
      const [l, v] = JSON.parse(args['odd-label']);
      await page.goto(`${base}/explore`);
      await page.locator(`tr.metric-row[data-metric="${metric}"] td`).nth(2).click();
      await page.locator('.metric-detail a.chip', { hasText: v }).click();
      await page.waitForURL(/\/query\?/);
      const rows = page.locator('.panel .result[data-state="done"] table.data tr');
      await rows.first().waitFor({ timeout: 10_000 });
      assert.equal(await rows.count(), 1);
      assert.ok((await rows.first().innerText()).includes(`${l}=${JSON.stringify(v)}`), await rows.first().innerText());
    }
  });

  await step('the status page shows build and runtime information and the flags', async () => {
    await page.goto(`${base}/status`);
    await page.locator('#flags').waitFor({ timeout: 10_000 });
    assert.match(await page.locator('#build-info').innerText(), /version/);
    assert.match(await page.locator('#runtime-info').innerText(), /storageRetention/);
    assert.match(await page.locator('#flags').innerText(), /storage\.tsdb\.path/);
    await shot('status');
  });

  if (args.store) {
    await step('the store selector switches every page to another store, and back', async () => {
      await page.goto(`${base}/status`);
      await page.locator('#stores').waitFor({ timeout: 10_000 });
      assert.match(await page.locator('#stores').innerText(), new RegExp(args.store));
      await Promise.all([page.waitForNavigation(), page.locator('#store').selectOption(args.store)]);
      await page.goto(`${base}/explore`);
      await page.locator(`tr.metric-row[data-metric="${args['store-metric']}"]`).waitFor({ timeout: 10_000 });
      assert.equal(await page.locator(`tr.metric-row[data-metric="${metric}"]`).count(), 0, 'the default store shows through');
      await page.goto(`${base}/query?g0.expr=${encodeURIComponent(args['store-metric'])}&g0.tab=table`);
      await page.locator('.panel table.data tr').first().waitFor({ timeout: 10_000 });
      await shot('store');
      await Promise.all([page.waitForNavigation(), page.locator('#store').selectOption('default')]);
      await page.goto(`${base}/explore`);
      await page.locator(`tr.metric-row[data-metric="${metric}"]`).waitFor({ timeout: 10_000 });
    });
  }

  assert.deepEqual(offsite, [], 'requests left the server');
  assert.deepEqual(consoleErrors.filter((e) => !/status of 400/.test(e)), [], 'errors in the console');
  console.log(`RESULT ${JSON.stringify(results)}`);
} finally {
  await browser.close();
}
