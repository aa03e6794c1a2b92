// Parses Mermaid diagrams with Mermaid's own parser, for the tests (tests/test_render.py).
// Each line on stdin is a JSON array of diagram texts; for each, one line on stdout: a JSON
// array with, for each diagram, either {"ok": false, "error": "..."} or {"ok": true, "type",
// "nodes": [{id, text, label}], "edges": [{start, end, text, label}], "subgraphs": [{id, text,
// label, nodes}]}: `text` as Mermaid's
// parser keeps it, `label` as a browser would show it (entity codes decoded, <br> as a newline).
import { createInterface } from "node:readline";
import { JSDOM } from "jsdom";

// Mermaid sanitizes labels with DOMPurify, which needs a window when it is first imported.
const { window } = new JSDOM("");
globalThis.window = window;
globalThis.document = window.document;
const { default: mermaid } = await import("mermaid");
mermaid.initialize({ startOnLoad: false });

// What Mermaid's rendering does with a parsed label: its entity placeholders back to HTML
// entities (mermaid's decodeEntities), then the text as HTML, line breaks kept.
function shown(text) {
  const html = text.replace(/ﬂ°°/g, "&#").replace(/ﬂ°/g, "&").replace(/¶ß/g, ";");
  const div = window.document.createElement("div");
  div.innerHTML = html.replace(/<br\s*\/?>/gi, "\n");
  return div.textContent;
}

async function check(text) {
  try {
    const { diagramType } = await mermaid.parse(text);
    const diagram = await mermaid.mermaidAPI.getDiagramFromText(text);
    const db = diagram.db;
    if (typeof db.getVertices !== "function") return { ok: true, type: diagramType };
    const nodes = [...db.getVertices().values()].map((v) => ({ id: v.id, text: v.text, label: shown(v.text) }));
    const edges = db.getEdges().map((e) => ({ start: e.start, end: e.end, text: e.text, label: shown(e.text) }));
    const subgraphs = db
      .getSubGraphs()
      .map((s) => ({ id: s.id, text: s.title, label: shown(s.title), nodes: [...s.nodes] }));
    return { ok: true, type: diagramType, nodes, edges, subgraphs };
  } catch (error) {
    return { ok: false, error: String(error?.message ?? error) };
  }
}

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (!line.trim()) continue;
  const results = [];
  for (const text of JSON.parse(line)) results.push(await check(text));
  process.stdout.write(JSON.stringify(results) + "\n");
}
