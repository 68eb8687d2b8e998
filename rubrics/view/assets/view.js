// rubric view: lays out the page's data (the JSON in #view-data) as a run table, a trajectory page, a comparison
// and a judge evaluation. Hand-written, no libraries, no network.
//
// Safety rule: every string from the data reaches the page as a text node (the `h` helper below) and never as
// markup; there is no innerHTML, data reaches attributes only as values through setAttribute (never parsed), and
// no link's address comes from the data (links are "#..." routes made of row numbers). Bidirectional and other invisible
// control characters are shown as visible marks so that they cannot reorder or hide what is displayed.
(function () {
  "use strict";

  const DATA = JSON.parse(document.getElementById("view-data").textContent);
  const TEXT_LIMIT = 20000; // longer texts show their start and a button: a 10 MB answer must not freeze the page
  const CONTROLS = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F\u061C\u200B-\u200F\u202A-\u202E\u2060-\u2069\uFEFF]/g;
  const app = document.getElementById("app");

  window.addEventListener("error", function (event) {
    document.body.setAttribute("data-js-error", String(event.message || "error"));
  });

  // ---- building blocks ------------------------------------------------------------------------------------

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") el.className = value;
      else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      el.appendChild(child instanceof Node ? child : shown(String(child)));
    }
    return el;
  }

  // Text as nodes, with control characters replaced by visible marks ("U+202E").
  function shown(text) {
    const frag = document.createDocumentFragment();
    let last = 0;
    CONTROLS.lastIndex = 0;
    for (let m = CONTROLS.exec(text); m !== null; m = CONTROLS.exec(text)) {
      if (m.index > last) frag.appendChild(document.createTextNode(text.slice(last, m.index)));
      const code = m[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0");
      const mark = document.createElement("span");
      mark.className = "ctl";
      mark.title = "invisible control character";
      mark.textContent = "U+" + code;
      frag.appendChild(mark);
      last = m.index + 1;
    }
    if (last < text.length) frag.appendChild(document.createTextNode(text.slice(last)));
    return frag;
  }

  // A long text: its first TEXT_LIMIT characters, and a button that shows the rest on demand.
  function longText(text, cls) {
    const box = h("div", { class: cls || "text" });
    if (text.length <= TEXT_LIMIT) {
      box.appendChild(shown(text));
      return box;
    }
    box.appendChild(shown(text.slice(0, TEXT_LIMIT)));
    const rest = text.length - TEXT_LIMIT;
    const button = h("button", {
      type: "button", class: "more",
      onclick: function () { button.remove(); box.appendChild(shown(text.slice(TEXT_LIMIT))); }
    }, "… show the remaining " + rest.toLocaleString() + " characters");
    return h("div", {}, box, button);
  }

  // Keys from the data ("constructor", "__proto__") must not find the prototype's properties.
  const own = (object, key) => Object.prototype.hasOwnProperty.call(object, key);
  const fmt = (x, digits) => (x === null || x === undefined ? "–" : Number(x).toFixed(digits === undefined ? 2 : digits));
  const pct = (x) => (x === null || x === undefined ? "–" : Math.round(x * 100) + "%");
  const signed = (x) => (x === null || x === undefined ? "–" : (x > 0 ? "+" : "") + Number(x).toFixed(3));

  function status(s) {
    return h("span", { class: "status-" + (s === "met" || s === "unmet" ? s : "error"), "data-status": s }, s);
  }

  // An item's status as what it did to the score: a penalty (negative points) that is met cost its points, so it
  // must not look like a green "met"; one that is unmet cost nothing, so it is neutral rather than a red "unmet".
  function itemStatus(item) {
    if (!(item.points < 0) || (item.status !== "met" && item.status !== "unmet")) return status(item.status);
    const applied = item.status === "met";
    const title = applied ? "met: the penalised behaviour occurred, " + item.points + " points"
      : "unmet: the penalised behaviour did not occur, no points taken";
    return h("span", { class: applied ? "status-penalty" : "status-not-applied", "data-status": item.status, title },
      applied ? "penalty applied (\u2212" + Math.abs(item.points) + ")" : "penalty not applied");
  }

  function gatePill(row) {
    if (row.gates_passed === true) return h("span", { class: "pill good" }, "passed");
    if (row.gates_passed === false) return h("span", { class: "pill bad" }, "failed");
    return h("span", { class: "pill warn" }, "errored");
  }

  function route() {
    const raw = location.hash.replace(/^#/, "");
    const [name, query] = raw.split("?");
    const params = new URLSearchParams(query || "");
    const hashParams = new URLSearchParams(name.includes("=") ? name : "");
    return { name: name.split("=")[0] || "", params, hashParams };
  }

  function setQuery(name, params) {
    const q = params.toString();
    history.replaceState(null, "", "#" + name + (q ? "?" + q : ""));
  }

  function topBar() {
    const links = [];
    if (DATA.run) links.push(h("a", { href: "#run" }, "run"));
    if (DATA.comparison) links.push(h("a", { href: "#compare" }, "compare"));
    if (DATA.judge_eval) links.push(h("a", { href: "#judge" }, "judge evaluation"));
    return h("header", { class: "top" }, h("h1", {}, "rubric view"), h("span", { class: "muted" }, DATA.title),
      h("nav", {}, links));
  }

  function problemsCard() {
    if (!DATA.problems.length && !DATA.notes.length) return null;
    return h("section", { class: "card", id: "problems" },
      h("h2", {}, DATA.problems.length + " bad line" + (DATA.problems.length === 1 ? "" : "s") +
        (DATA.notes.length ? ", " + DATA.notes.length + " note" + (DATA.notes.length === 1 ? "" : "s") : "")),
      DATA.problems.map((p) => h("div", { class: "problem", "data-line": p.line }, p.file + ":" + p.line + ": " + p.message)),
      DATA.notes.map((n) => h("div", { class: "problem note" }, n)));
  }

  // ---- the run page ---------------------------------------------------------------------------------------

  const COLUMNS = [
    { key: "trajectory_id", label: "trajectory", value: (r) => r.trajectory_id },
    { key: "task_id", label: "task", value: (r) => r.task_id || "" },
    { key: "rubric_id", label: "rubric", value: (r) => r.rubric_id },
    { key: "score", label: "score", num: true, value: (r) => r.score },
    { key: "expected_score", label: "expected", num: true, value: (r) => r.expected_score },
    { key: "range", label: "range", num: true, value: (r) => r.score_low },
    { key: "gates", label: "gates", value: (r) => (r.gates_passed === true ? 2 : r.gates_passed === false ? 0 : 1) },
    { key: "uncertain_items", label: "uncertain", num: true, value: (r) => r.uncertain_items },
    { key: "tags", label: "tag scores", value: (r) => Object.keys(r.tags).length },
    { key: "complete", label: "complete", value: (r) => (r.complete ? 1 : 0) },
  ];

  function matches(row, p) {
    const gate = p.get("gate");
    if (gate === "failed" && row.gates_passed !== false) return false;
    if (gate === "passed" && row.gates_passed !== true) return false;
    if (gate === "errored" && row.gates_passed !== null) return false;   // none unmet, one could not be evaluated
    if (p.get("complete") === "no" && row.complete) return false;
    if (p.get("complete") === "yes" && !row.complete) return false;
    if (p.get("uncertain") === "yes" && row.uncertain_items === 0) return false;
    const tag = p.get("tag");
    if (tag && !own(row.tags, tag) && !rowItemTags(row).has(tag)) return false;
    const item = p.get("item");
    if (item) {
      const st = p.get("status") || "met";
      const list = st === "met" ? row.met : st === "unmet" ? row.unmet : row.errored;
      if (!list.includes(item)) return false;
    }
    const min = p.get("min"), max = p.get("max");
    if (min !== null && min !== "" && row.score < Number(min)) return false;
    if (max !== null && max !== "" && row.score > Number(max)) return false;
    const q = (p.get("q") || "").toLowerCase();
    if (q && !(row.trajectory_id.toLowerCase().includes(q) || (row.task_id || "").toLowerCase().includes(q) ||
               row.rubric_id.toLowerCase().includes(q))) return false;
    return true;
  }

  const itemTagCache = new Map();
  function rowItemTags(row) {
    if (!itemTagCache.has(row.index)) {
      itemTagCache.set(row.index, new Set(DATA.run.results[row.index].items.flatMap((i) => i.tags || [])));
    }
    return itemTagCache.get(row.index);
  }

  function select(name, options, value, onchange) {
    return h("select", { name, onchange },
      options.map(([v, label]) => h("option", { value: v, selected: v === (value || "") }, label)));
  }

  function runPage(params) {
    const run = DATA.run;
    const rows = run.rows;
    const trs = new Map();
    const tbody = h("tbody", {});
    const counter = h("span", { id: "shown-count", class: "muted" });
    const table = h("table", { id: "runs" });

    let sortedBy = null; // the order the rows are in: re-appending 1,000 rows is only worth it when it changes

    function apply() {
      const started = performance.now();
      let visible = 0;
      for (const row of rows) {
        const ok = matches(row, params);
        trs.get(row.index).hidden = !ok;
        if (ok) visible++;
      }
      const wanted = (params.get("sort") || "") + ":" + (params.get("dir") || "");
      if (wanted !== sortedBy) {
        sortRows();
        sortedBy = wanted;
      }
      const ms = performance.now() - started;
      table.setAttribute("data-filter-ms", ms.toFixed(2));
      table.setAttribute("data-visible", visible);
      counter.textContent = visible + " of " + rows.length + " shown";
      setQuery("run", params);
    }

    function sortRows() {
      const key = params.get("sort");
      const column = COLUMNS.find((c) => c.key === key);
      const order = rows.slice();
      if (column) {
        const dir = params.get("dir") === "desc" ? -1 : 1;
        order.sort((a, b) => {
          const x = column.value(a), y = column.value(b);
          if (x === y) return a.index - b.index;
          if (x === null) return 1;
          if (y === null) return -1;
          return (x < y ? -1 : 1) * dir;
        });
      }
      for (const row of order) tbody.appendChild(trs.get(row.index));
      for (const th of table.querySelectorAll("th")) {
        th.classList.toggle("sorted-asc", th.dataset.key === key && params.get("dir") !== "desc");
        th.classList.toggle("sorted-desc", th.dataset.key === key && params.get("dir") === "desc");
      }
    }

    function onFilter(event) {
      const el = event.target;
      if (el.value === "" || el.value === "any") params.delete(el.name); else params.set(el.name, el.value);
      apply();
    }

    for (const row of rows) {
      const tags = Object.entries(row.tags).map(([t, s]) => h("span", { class: "pill" }, t + " " + fmt(s)));
      trs.set(row.index, h("tr", { "data-index": row.index },
        h("td", { class: "id" }, h("a", { href: "#t=" + row.index }, row.trajectory_id)),
        h("td", { class: "id" }, row.task_id || "–"),
        h("td", { class: "id" }, row.rubric_id),
        h("td", { class: "num score" }, fmt(row.score, 3)),
        h("td", { class: "num" }, fmt(row.expected_score, 3)),
        h("td", { class: "num" }, row.score_low === null ? "–" : fmt(row.score_low) + "–" + fmt(row.score_high)),
        h("td", {}, gatePill(row)),
        h("td", { class: "num" }, row.uncertain_items ? h("span", { class: "pill warn" }, row.uncertain_items) : "0"),
        h("td", {}, tags.length ? tags : "–"),
        h("td", {}, row.complete ? "yes" : h("span", { class: "pill warn" }, "incomplete"))));
    }
    table.appendChild(h("thead", {}, h("tr", {}, COLUMNS.map((c) => h("th", {
      class: "sortable" + (c.num ? " num" : ""), "data-key": c.key,
      onclick: function () {
        const same = params.get("sort") === c.key;
        params.set("sort", c.key);
        params.set("dir", same && params.get("dir") !== "desc" ? "desc" : "asc");
        apply();
      }
    }, c.label)))));
    table.appendChild(tbody);

    const itemOptions = [["", "any item"]].concat(run.items.map((i) => [i.item_id, i.item_id]));
    const filters = h("form", { class: "filters", id: "filters", onsubmit: (e) => e.preventDefault() },
      h("label", {}, "search ", h("input", { type: "search", name: "q", value: params.get("q") || "", placeholder: "trajectory, task or rubric id", oninput: onFilter })),
      h("label", {}, "gates ", select("gate", [["", "any"], ["failed", "failed"], ["passed", "passed"], ["errored", "errored"]], params.get("gate"), onFilter)),
      h("label", {}, "complete ", select("complete", [["", "any"], ["no", "incomplete"], ["yes", "complete"]], params.get("complete"), onFilter)),
      h("label", {}, "uncertain ", select("uncertain", [["", "any"], ["yes", "has uncertain items"]], params.get("uncertain"), onFilter)),
      run.tags.length ? h("label", {}, "tag ", select("tag", [["", "any"]].concat(run.tags.map((t) => [t, t])), params.get("tag"), onFilter)) : null,
      h("label", {}, "item ", select("item", itemOptions, params.get("item"), onFilter),
        select("status", [["met", "met"], ["unmet", "unmet"], ["error", "error"]], params.get("status") || "met", onFilter)),
      h("label", {}, "score ", h("input", { type: "number", name: "min", min: 0, max: 1, step: 0.05, value: params.get("min") || "", oninput: onFilter }),
        "to", h("input", { type: "number", name: "max", min: 0, max: 1, step: 0.05, value: params.get("max") || "", oninput: onFilter })),
      counter);

    app.replaceChildren(topBar(), h("main", {}, problemsCard(), summaryCards(run, params, apply), filters, table));
    apply();
  }

  function summaryCards(run, params, apply) {
    const most = Math.max(1, ...run.histogram.map((b) => b.count));
    const hist = h("div", { class: "hist", id: "histogram" }, run.histogram.map((b) => {
      const bar = h("div", {
        class: "bar", title: b.count + " with score " + fmt(b.low) + "–" + fmt(b.high), "data-count": b.count,
        onclick: function () { params.set("min", b.low); params.set("max", b.high); runPage(params); }
      }, h("span", {}, b.count || ""));
      bar.style.height = (100 * b.count / most) + "%";
      return bar;
    }));
    const rates = h("table", { id: "item-rates" }, h("thead", {}, h("tr", {}, h("th", {}, "item"), h("th", {}, "kind"),
      h("th", {}, "met rate"), h("th", { class: "num" }, "met"), h("th", { class: "num" }, "unmet"), h("th", { class: "num" }, "error"))),
      h("tbody", {}, run.items.map((i) => {
        const bar = h("i", {});
        bar.style.width = ((i.met_rate || 0) * 100) + "%";
        return h("tr", {}, h("td", { class: "id", title: i.text || "" }, i.item_id), h("td", {}, i.kind),
          h("td", {}, h("span", { class: "rate" }, bar), pct(i.met_rate)), h("td", { class: "num" }, i.met),
          h("td", { class: "num" }, i.unmet), h("td", { class: "num" }, i.errored));
      })));
    const failed = run.rows.filter((r) => r.gates_passed === false).length;
    const incomplete = run.rows.filter((r) => !r.complete).length;
    const mean = run.rows.length ? run.rows.reduce((s, r) => s + r.score, 0) / run.rows.length : null;
    const totals = h("section", { class: "card", id: "totals" }, h("h2", {}, run.rows.length + " results"),
      h("div", {}, "mean score " + fmt(mean) + " · gate failed " + failed + " · incomplete " + incomplete + " · with uncertain items " +
        run.rows.filter((r) => r.uncertain_items > 0).length),
      h("div", { class: "muted" }, run.file),
      run.usage ? h("div", { id: "usage" }, "judge usage over " + run.usage.results + " results: " +
        run.usage.prompt_tokens.toLocaleString() + " prompt tokens (" + run.usage.cached_tokens.toLocaleString() + " cached), " +
        run.usage.completion_tokens.toLocaleString() + " generated, " + run.usage.cached_verdicts + " cached verdicts" +
        (run.usage.cost === null ? "" : " · cost " + run.usage.cost.toFixed(4))) : h("div", { class: "muted" }, "no judge usage in these results"));
    return h("div", { class: "summary" }, totals,
      h("section", { class: "card" }, h("h2", {}, "scores"), hist, h("div", { class: "hist-axis" }, h("span", {}, "0"), h("span", {}, "0.5"), h("span", {}, "1"))),
      h("section", { class: "card items" }, h("h2", {}, "items"), rates));
  }

  // ---- the trajectory page --------------------------------------------------------------------------------

  function probabilityBar(item, band) {
    if (item.probability === null || item.probability === undefined) return h("span", { class: "muted" }, "–");
    const box = h("div", { class: "prob", title: "probability " + fmt(item.probability, 3) + ", threshold " + fmt(band.threshold) +
      ", uncertain band " + fmt(band.low) + "–" + fmt(band.high) + " (" + band.source + ")" });
    const area = h("div", { class: "band" });
    area.style.left = (band.low * 100) + "%";
    area.style.width = ((band.high - band.low) * 100) + "%";
    const fill = h("div", { class: "fill" });
    fill.style.width = (Math.max(0, Math.min(1, item.probability)) * 100) + "%";
    const cut = h("div", { class: "threshold" });
    cut.style.left = "calc(" + (band.threshold * 100) + "% - 1px)";
    box.append(area, fill, cut);
    return h("div", {}, box, h("span", { class: "muted" }, fmt(item.probability, 3) + " vs " + fmt(band.threshold) +
      (band.source === "rubric" ? "" : " (" + band.source + ")")));
  }

  function trajectoryPage(index, side) {
    const run = side === "b" ? DATA.other : DATA.run;
    if (!run || !(index >= 0 && index < run.results.length)) {
      app.replaceChildren(topBar(), h("main", {}, h("p", {}, "No such result.")));
      return;
    }
    const result = run.results[index];
    const bands = run.bands[index];
    const traj = run.trajectories[index];
    const partEls = [];
    const itemRows = [];

    function focus(itemId) {
      for (const tr of itemRows) tr.classList.toggle("focus", tr.dataset.item === itemId);
      let first = null;
      partEls.forEach(([el, part]) => {
        const on = part.marks.includes(itemId);
        el.classList.toggle("focus", on);
        if (on && !first) first = el;
      });
      if (first) first.scrollIntoView({ block: "nearest" });
    }

    const items = h("table", { id: "items" }, h("thead", {}, h("tr", {}, h("th", {}, "item"), h("th", {}, "status"),
      h("th", { class: "num" }, "points"), h("th", {}, "probability"), h("th", {}, "evidence"))),
      h("tbody", {}, result.items.map((item) => {
        const members = (item.members || []).map((m) => h("div", { class: "member muted" }, m.judge + ": " +
          (m.met === null ? "error" : m.met ? "met" : "unmet") + (m.probability === null ? "" : " (" + fmt(m.probability, 3) + ")") +
          (m.error ? " – " + m.error : "")));
        const tr = h("tr", { class: "item-row", "data-item": item.id, onclick: () => focus(item.id) },
          h("td", { class: "id" }, h("div", {}, item.id, " ", h("span", { class: "pill" }, item.kind), item.uncertain ? h("span", { class: "pill warn" }, "uncertain") : null,
            (item.tags || []).map((t) => h("span", { class: "pill" }, t))), h("div", { class: "muted" }, item.text || "")),
          h("td", {}, itemStatus(item), h("div", { class: "muted" }, item.method)),
          h("td", { class: "num" }, item.points === null ? "gate" : item.points),
          h("td", {}, item.method === "judge" && own(bands, item.id) ? probabilityBar(item, bands[item.id])
            : h("span", { class: "muted" }, item.method), members),
          h("td", {}, longText(item.evidence || ""), item.error ? h("div", { class: "problem" }, item.error) : null));
        itemRows.push(tr);
        return tr;
      })));

    let trajectoryCard;
    if (traj) {
      trajectoryCard = h("section", { class: "card", id: "trajectory" }, h("h2", {}, "trajectory"),
        traj.source ? h("div", { class: "muted" }, traj.source) : null,
        traj.parts.map((part) => {
          const el = h("div", { class: "part part-" + part.kind + (part.marks.length ? " marked" : ""), "data-kind": part.kind },
            h("h3", {}, part.title), part.marks.length ? h("div", { class: "marks" }, "evidence of: " + part.marks.join(", ")) : null,
            longText(part.text));
          partEls.push([el, part]);
          return el;
        }));
    } else {
      trajectoryCard = h("section", { class: "card", id: "trajectory" }, h("h2", {}, "trajectory"),
        h("p", { class: "muted" }, "No trajectory with this id was given: rubric view ... --trajectories DIR or FILE " +
          "shows it here."));
    }
    const errors = (result.errors || []).map((e) => h("div", { class: "problem" }, e));
    const head = h("section", { class: "card", id: "result-head" },
      h("h2", {}, result.trajectory_id),
      h("div", {}, "task " + (result.task_id || "–") + " · rubric " + result.rubric_id + " · judge " + (result.judge || "–")),
      h("div", {}, "score ", h("b", { class: "score" }, fmt(result.score, 3)), " (" + result.earned + " of " + result.total + ")",
        " · expected " + fmt(result.expected_score) + " · range " + (result.score_low === null ? "–" : fmt(result.score_low) + "–" + fmt(result.score_high)),
        " · gates ", gatePill(result), " · ", result.complete ? "complete" : h("span", { class: "pill warn" }, "incomplete")),
      errors);
    app.replaceChildren(topBar(), h("main", {}, h("div", {}, h("a", { href: side === "b" ? "#compare" : "#run" }, "← back")), head,
      h("div", { class: "layout" }, h("section", { class: "card" }, h("h2", {}, "items"), items), trajectoryCard)));
  }

  // ---- compare --------------------------------------------------------------------------------------------

  function comparePage(params) {
    const c = DATA.comparison;
    const s = c.summary;
    const tbody = h("tbody", {}, c.pairs.map((p) => h("tr", { "data-difference": p.difference, "data-key-index": p.index_a, hidden: params.get("changed") === "yes" && !p.flipped.length && Math.abs(p.difference) < 1e-9 },
      h("td", { class: "id" }, p.key), h("td", { class: "num" }, h("a", { href: "#t=" + p.index_a }, fmt(p.score_a, 3))),
      h("td", { class: "num" }, h("a", { href: "#b=" + p.index_b }, fmt(p.score_b, 3))),
      h("td", { class: "num " + (p.difference > 1e-9 ? "diff-up" : p.difference < -1e-9 ? "diff-down" : "") }, signed(p.difference)),
      h("td", {}, p.complete ? "" : h("span", { class: "pill warn" }, "incomplete")),
      h("td", {}, p.flipped.map((f) => h("span", { class: "pill flip" }, f.item_id + ": " + f.before + " → " + f.after))))));
    const summary = h("section", { class: "card", id: "compare-summary" }, h("h2", {}, "B against A"),
      h("div", {}, "A: " + c.file_a), h("div", {}, "B: " + c.file_b),
      h("div", {}, s.paired + " paired, " + s.compared + " compared (both complete): " + s.improved + " improved, " +
        s.regressed + " regressed, " + s.unchanged + " unchanged"),
      h("div", { id: "mean-difference" }, "mean difference " + signed(s.mean_difference) + ", 95% bootstrap interval [" +
        signed(s.low) + ", " + signed(s.high) + "] (" + s.resamples + " resamples, seed " + s.seed + ")"),
      c.only_in_a.length ? h("div", { class: "muted" }, "only in A: " + c.only_in_a.join(", ")) : null,
      c.only_in_b.length ? h("div", { class: "muted" }, "only in B: " + c.only_in_b.join(", ")) : null);
    const toggle = h("label", {}, h("input", { type: "checkbox", name: "changed", checked: params.get("changed") === "yes",
      onchange: function (e) { if (e.target.checked) params.set("changed", "yes"); else params.delete("changed"); setQuery("compare", params); comparePage(params); } }),
      " changed only");
    app.replaceChildren(topBar(), h("main", {}, problemsCard(), summary, h("form", { class: "filters" }, toggle),
      h("table", { id: "compare" }, h("thead", {}, h("tr", {}, h("th", {}, "trajectory"), h("th", { class: "num" }, "A"),
        h("th", { class: "num" }, "B"), h("th", { class: "num" }, "B − A"), h("th", {}, ""), h("th", {}, "items that flipped"))), tbody)));
  }

  // ---- judge evaluation -----------------------------------------------------------------------------------

  function reliabilityDiagram(bins) {
    const NS = "http://www.w3.org/2000/svg";
    const size = 260, pad = 30, inner = size - 2 * pad;
    const svg = document.createElementNS(NS, "svg");
    const el = (tag, attrs) => { const e = document.createElementNS(NS, tag); for (const k in attrs) e.setAttribute(k, attrs[k]); return e; };
    svg.setAttribute("class", "reliability");
    svg.setAttribute("id", "reliability");
    svg.setAttribute("width", size);
    svg.setAttribute("height", size);
    const x = (p) => pad + p * inner, y = (p) => size - pad - p * inner;
    svg.appendChild(el("rect", { x: pad, y: pad, width: inner, height: inner, fill: "none", stroke: "#d9dee6" }));
    svg.appendChild(el("line", { x1: x(0), y1: y(0), x2: x(1), y2: y(1), stroke: "#9aa7bd", "stroke-dasharray": "4 3" }));
    for (const b of bins) {
      if (b.count === 0) continue;
      const dot = el("circle", { cx: x(b.mean_probability), cy: y(b.observed_rate), r: 3 + Math.min(8, Math.sqrt(b.count)), fill: "#2454a6", "fill-opacity": 0.7, class: "bin" });
      const title = el("title", {});
      title.textContent = b.count + " labels, mean probability " + fmt(b.mean_probability) + ", observed " + fmt(b.observed_rate);
      dot.appendChild(title);
      svg.appendChild(dot);
    }
    const label = (t, xx, yy, anchor) => { const e = el("text", { x: xx, y: yy, "text-anchor": anchor || "middle" }); e.textContent = t; return e; };
    svg.append(label("0", x(0), size - pad + 14), label("1", x(1), size - pad + 14), label("judge probability", size / 2, size - 4),
      label("1", pad - 6, y(1) + 4, "end"), label("observed", pad - 4, pad - 10, "start"));
    return svg;
  }

  function agreementRow(a) {
    return h("tr", {}, h("td", { class: "id" }, a.item_id), h("td", { class: "num" }, a.n), h("td", { class: "num" }, a.positives),
      h("td", { class: "num" }, a.errors), h("td", { class: "num" }, fmt(a.accuracy)), h("td", { class: "num" }, fmt(a.balanced_accuracy)),
      h("td", { class: "num" }, fmt(a.kappa)), h("td", { class: "num" }, fmt(a.brier)), h("td", { class: "num" }, fmt(a.threshold)));
  }

  function judgePage() {
    const j = DATA.judge_eval;
    const head = h("tr", {}, ["item", "n", "met", "errors", "accuracy", "balanced", "kappa", "brier", "threshold"].map((t) => h("th", {}, t)));
    const agreementTable = h("table", { id: "agreement" }, h("thead", {}, head), h("tbody", {}, j.items.map(agreementRow), agreementRow(j.overall)));
    const diagram = j.has_label_rows ? reliabilityDiagram(j.bins)
      : h("p", { class: "muted" }, "This file has the report only: write it with `rubric judge-eval ... --json OUT` for the diagram and the disagreements.");
    const disagreements = h("section", { class: "card", id: "disagreements" }, h("h2", {}, j.disagreements.length + " labels where judge and label disagree"),
      j.disagreements.map((d) => h("div", { class: "part disagreement" },
        h("h3", {}, d.item_id + " · " + d.trajectory_id), h("div", { class: "muted" }, d.source + (d.domain ? " · " + d.domain : "") + (d.difficulty ? " · " + d.difficulty : "")),
        h("div", {}, "label ", status(d.met ? "met" : "unmet"), " · judge " + fmt(d.probability, 3) + " against threshold " + fmt(d.threshold)),
        d.rationale ? h("div", {}, h("b", {}, "rationale"), longText(d.rationale)) : null,
        d.evidence.map((e) => h("div", {}, h("b", {}, "evidence: " + e.name), longText(e.text))))));
    app.replaceChildren(topBar(), h("main", {}, h("section", { class: "card" }, h("h2", {}, "judge " + j.judge + " · " + j.labels + " labels"),
      h("div", { class: "muted" }, j.file)), h("div", { class: "layout" }, h("section", { class: "card" }, h("h2", {}, "agreement per item"), agreementTable),
      h("section", { class: "card" }, h("h2", {}, "reliability"), diagram)), disagreements));
  }

  // ---- routing --------------------------------------------------------------------------------------------

  function render() {
    const r = route();
    let view;
    if (r.name === "t" || r.name === "b") {
      view = "trajectory";
      trajectoryPage(Number(r.hashParams.get(r.name)), r.name === "b" ? "b" : "a");
    } else if (r.name === "compare" && DATA.comparison) {
      view = "compare";
      comparePage(r.params);
    } else if (DATA.judge_eval && (r.name === "judge" || !DATA.run)) {
      view = "judge";
      judgePage();
    } else {
      view = "run";
      runPage(r.params);
    }
    document.body.setAttribute("data-view", view);
    document.body.setAttribute("data-ready", "1");
    window.scrollTo(0, 0);
  }

  window.addEventListener("hashchange", render);
  render();
})();
