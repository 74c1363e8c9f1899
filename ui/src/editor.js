// The PromQL editor: CodeMirror 6 with Prometheus' own PromQL language package
// (@prometheus-io/codemirror-promql: highlighting, and autocompletion of functions, metric names, label
// names and values through this server's API). Linting is ours: the text goes to /api/v1/parse_query,
// so the errors shown inline are exactly the ones a query would get from Tessera's parser.
import { EditorView, keymap, placeholder, highlightSpecialChars, drawSelection } from '@codemirror/view';
import { EditorState, Prec } from '@codemirror/state';
import { defaultKeymap, history, historyKeymap, insertNewline } from '@codemirror/commands';
import { autocompletion, completionKeymap, closeBrackets, closeBracketsKeymap, completionStatus } from '@codemirror/autocomplete';
import { syntaxHighlighting, HighlightStyle, bracketMatching } from '@codemirror/language';
import { linter, lintGutter } from '@codemirror/lint';
import { tags } from '@lezer/highlight';
import { PromQLExtension } from '@prometheus-io/codemirror-promql';
import { apiPost, storePrefix } from './api.js';

const highlight = HighlightStyle.define([
  { tag: tags.number, color: '#09885a' },
  { tag: tags.string, color: '#a31515' },
  { tag: tags.keyword, color: '#008080', fontWeight: 'bold' },
  { tag: tags.function(tags.variableName), color: '#008080' },
  { tag: tags.labelName, color: '#800000' },
  { tag: tags.operator },
  { tag: tags.modifier, color: '#008080', fontWeight: 'bold' },
  { tag: tags.paren },
  { tag: tags.squareBracket },
  { tag: tags.brace },
  { tag: tags.invalid, color: 'red' },
  { tag: tags.comment, color: '#888', fontStyle: 'italic' },
]);

/** `line:col` of our parser's message → a document offset (col is 1-based, in bytes as upstream's
 * `StartPosInput`; the editor counts UTF-16 units, which agree for ASCII). */
export function errorRange(doc, message) {
  const m = /^(\d+):(\d+): parse error: /.exec(message);
  if (!m) return { from: 0, to: doc.length };
  const lineNo = Math.min(Math.max(parseInt(m[1], 10), 1), doc.lines);
  const line = doc.line(lineNo);
  let from = Math.min(line.from + Math.max(parseInt(m[2], 10) - 1, 0), line.to);
  // An error at the very end (an unclosed parenthesis, a missing operand) marks the last character,
  // so that it is underlined rather than drawn as a point.
  if (from >= line.to && from > line.from) from = line.to - 1;
  return { from, to: Math.min(from + 1, doc.length) };
}

/** Lints with Tessera's own parser (debounced by CodeMirror's linter). */
const serverLinter = linter(
  async (view) => {
    const text = view.state.doc.toString();
    if (!text.trim()) return [];
    try {
      await apiPost('/api/v1/parse_query', { query: text });
      return [];
    } catch (e) {
      // Only the parser's verdicts are lint: not a lost connection, a refused credential or a rate limit.
      if (e.type !== 'bad_data') return [];
      const msg = e.message.replace(/^invalid parameter "query": /, '');
      const { from, to } = errorRange(view.state.doc, msg);
      return [{ from, to: Math.max(to, from), severity: 'error', message: msg, source: 'tessera' }];
    }
  },
  { delay: 300 }
);

/** Creates an editor in `parent`. `onRun` fires on Enter (Shift+Enter inserts a newline). */
export function createEditor(parent, { doc = '', onRun, onChange }) {
  const promql = new PromQLExtension()
    .activateLinter(false)
    .setComplete({ remote: { url: storePrefix(), httpMethod: 'GET', cache: { maxAge: 60_000 } } });
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc,
      extensions: [
        highlightSpecialChars(),
        history(),
        drawSelection(),
        bracketMatching(),
        closeBrackets(),
        autocompletion(),
        syntaxHighlighting(highlight),
        placeholder('Expression (press Shift+Enter for newlines)'),
        promql.asExtension(),
        serverLinter,
        lintGutter(),
        EditorView.lineWrapping,
        Prec.highest(
          keymap.of([
            // Enter runs the query, unless it is choosing a completion.
            { key: 'Enter', run: (v) => (completionStatus(v.state) === 'active' ? false : (onRun(), true)) },
            { key: 'Shift-Enter', run: insertNewline },
          ])
        ),
        keymap.of([...closeBracketsKeymap, ...defaultKeymap, ...historyKeymap, ...completionKeymap]),
        EditorView.updateListener.of((u) => {
          if (u.docChanged && onChange) onChange(u.state.doc.toString());
        }),
      ],
    }),
  });
  return {
    view,
    get value() {
      return view.state.doc.toString();
    },
    set value(v) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: v } });
    },
  };
}
