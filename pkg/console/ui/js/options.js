// The options page: the cluster-wide options (replicated), their values and
// defaults; a value that differs from its default stands out.
import { h, clear, text, cli, shellQuote, table } from "./dom.js";
import { get } from "./api.js";

export function mount(main) {
  const body = h("div", { id: "options-table" });
  const next = h("div");
  const summary = h("div", { class: "summary" });
  clear(main).append(h("div", { class: "page-head" }, h("h1", null, "Options"), summary), body, next);
  return {
    async refresh() {
      const ans = await get("options");
      const opts = ans.options || [];
      const rows = opts.map((o) => h("tr", { "data-option": o.key, class: o.is_default ? "" : "changed" },
        h("td", null, h("code", null, o.key)),
        h("td", { "data-col": "value" }, h("strong", null, text(o.value)), o.is_default ? null : h("span", { class: "tag" }, "set")),
        h("td", null, text(o.default_value)),
        h("td", { class: "muted" }, text(o.description))));
      clear(summary).append(h("span", { class: "muted" }, opts.length + " options · " + opts.filter((o) => !o.is_default).length + " differ from their default"));
      clear(body).append(table(["Option", "Value", "Default", "Meaning"], rows, { class: "grid", id: "options" }));
      const changed = opts.find((o) => !o.is_default) || opts[0];
      const cmds = [["lancemaster config list", "the same table in a terminal"]];
      if (changed) {
        cmds.push(["lancemaster config get " + shellQuote(changed.key), "one option"]);
        cmds.push(["lancemaster config set " + shellQuote(changed.key) + " " + shellQuote(changed.default_value), "set it (back to its default here); validated when set"]);
      }
      clear(next).append(cli(cmds));
    },
  };
}
