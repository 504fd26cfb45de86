// Run by tests/viz/test_explorers.py with Node (node --input-type=module -e, from the root).
import * as vega from "vega";
import * as vl from "vega-lite";
import {readFileSync} from "node:fs";
const input = JSON.parse(readFileSync(0, "utf8"));
const compiled = vl.compile(input.spec).spec;
const names = compiled.data.map((d) => d.name);
const view = new vega.View(vega.parse(compiled), {renderer: "none"});
await view.runAsync();
const plain = (r) => Object.fromEntries(
  Object.entries(r).filter(([, v]) => v === null || typeof v !== "object"));
const out = [];
for (const signals of input.settings) {
  for (const [k, v] of Object.entries(signals)) view.signal(k, v);
  await view.runAsync();
  out.push(Object.fromEntries(names.map((n) => [n, view.data(n).map(plain)])));
}
process.stdout.write(JSON.stringify(out));
