(function () {
  "use strict";
  // Every value below comes from the trace: it is untrusted and only ever reaches the page as text.
  var data = JSON.parse(document.getElementById("chronicle-data").textContent);
  var B = data.boundaries;
  var T = data.trace;
  var report = data.report;
  var MAX_MARKS = 2000;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]);
    return parent;
  }
  function fmtMs(ms) {
    if (ms >= 60000) return (ms / 60000).toFixed(1) + " min";
    if (ms >= 1000) return (ms / 1000).toFixed(2) + " s";
    if (ms >= 10) return ms.toFixed(1) + " ms";
    return ms.toFixed(2) + " ms";
  }
  function kindBadge(b) {
    return el("span", "kind k-" + b.kc, b.kind);
  }
  function statusBadge(status) {
    return el("span", "badge " + (status === "ERROR" ? "error" : "ok"), status);
  }

  // ---- structure -------------------------------------------------------------------------------------------------
  var children = B.map(function () { return []; });
  var roots = [];
  B.forEach(function (b, i) {
    if (b.parent >= 0 && b.parent < B.length && b.parent !== i) children[b.parent].push(i);
    else roots.push(i);
  });
  var depth = new Array(B.length);
  function depthOf(i) {
    var d = 0, p = B[i].parent, guard = 0;
    while (p >= 0 && p < B.length && guard++ < B.length) { d++; p = B[p].parent; }
    return d;
  }
  for (var i = 0; i < B.length; i++) depth[i] = depthOf(i);
  var hasErrorBelow = new Array(B.length).fill(false);
  B.forEach(function (b, i) {
    if (b.status !== "ERROR") return;
    var p = b.parent, guard = 0;
    while (p >= 0 && p < B.length && guard++ < B.length) { hasErrorBelow[p] = true; p = B[p].parent; }
  });

  // Findings of the replay report, per boundary.
  var findingsOf = B.map(function () { return []; });
  var modeOf = new Array(B.length).fill("");
  if (report) {
    report.sections.forEach(function (s) {
      s.findings.forEach(function (f) {
        if (f.boundary >= 0 && f.boundary < B.length) findingsOf[f.boundary].push({ section: s.name, f: f });
      });
    });
    report.stubbed.forEach(function (i) { if (i >= 0 && i < B.length) modeOf[i] = "stubbed"; });
    report.live.forEach(function (i) { if (i >= 0 && i < B.length) modeOf[i] = "live"; });
  }

  // ---- header ----------------------------------------------------------------------------------------------------
  var selected = -1;
  var query = "";
  var viewMode = "readable";

  (function header() {
    var head = document.getElementById("head");
    var title = el("div", "title");
    add(title, el("h1", null, T.root || "(no boundary)"));
    if (T.status) add(title, statusBadge(T.status));
    if (T.replay_of) add(title, el("span", "badge mode", "replay of " + T.replay_of));
    add(title, el("span", "tid", "trace " + T.id));
    add(head, title);
    var stats = el("div", "stats");
    function stat(label, value) {
      var s = el("span", null, label + " ");
      add(s, el("b", null, value));
      add(stats, s);
    }
    stat("started", T.started);
    stat("duration", fmtMs(T.duration));
    stat("boundaries", T.shown < T.boundaries ? T.shown + " of " + T.boundaries : String(T.boundaries));
    stat("spans", String(T.spans));
    if (T.source) stat("from", T.source);
    add(head, stats);
    var chips = el("div", "chips");
    if (T.errors) {
      var firstError = B.findIndex(function (b) { return b.status === "ERROR"; });
      var errChip = el("button", "chip err", T.errors + (T.errors === 1 ? " error" : " errors"));
      errChip.type = "button";
      errChip.title = "show the first error";
      errChip.addEventListener("click", function () { if (firstError >= 0) select(firstError, true); });
      add(chips, errChip);
    }
    add(chips, el("span", "label", T.session.length ? "session" : "no session variables"));
    T.session.forEach(function (kv) {
      var c = el("span", "chip sess");
      add(c, el("span", "k", kv[0] + " = "), el("span", "v", kv[1]));
      c.title = kv[0] + " = " + kv[1];
      add(chips, c);
    });
    add(head, chips);
  })();

  (function panels() {
    var panels = document.getElementById("panels");
    if (report) {
      var det = el("details", "panel report " + (report.ok ? "good" : "bad"));
      det.open = true;
      det.id = "report";
      add(det, el("summary", null, report.summary));
      var box = el("div", "findings");
      report.sections.forEach(function (s) {
        if (!s.count) return;
        add(box, el("h3", null, s.title + " (" + s.count + ")"));
        s.findings.forEach(function (f) {
          var row = el("div", "finding f-" + s.name + (f.boundary >= 0 ? " link" : ""));
          add(row, el("span", "fk", "[" + f.kind + "] "));
          add(row, document.createTextNode((f.key ? f.key + ": " : "") + f.message));
          f.details.forEach(function (d) { add(row, document.createTextNode("\n    " + d)); });
          if (f.boundary >= 0) {
            row.title = "show this boundary";
            row.addEventListener("click", function () { select(f.boundary, true); });
          } else if (f.key) {
            add(row, el("span", "k", "  (no such boundary in this trace)"));
          }
          add(box, row);
        });
        if (s.count > s.findings.length) add(box, el("div", "warning", "… and " + (s.count - s.findings.length) + " more"));
      });
      add(det, box);
      add(panels, det);
    }
    if (T.warnings.length) {
      var w = el("details", "panel");
      add(w, el("summary", null, "loading warnings (" + (T.warnings.length + T.more_warnings) + ")"));
      T.warnings.forEach(function (text) { add(w, el("div", "warning", text)); });
      if (T.more_warnings) add(w, el("div", "warning", "… and " + T.more_warnings + " more"));
      add(panels, w);
    }
  })();

  (function footer() {
    var foot = document.getElementById("foot");
    var L = data.limits;
    add(foot, document.createTextNode(
      "Written by chronicle view " + data.version + ": a self-contained page, trace data shown as text only. " +
      "Each payload is cut at " + Math.round(L.payload_chars / 1024) + " K characters, a page holds at most " +
      L.boundaries.toLocaleString("en") + " boundaries and " + Math.round(L.page_chars / 1048576) +
      " M characters of payloads. "));
    if (T.shown < T.boundaries) {
      add(foot, el("span", "capped", "This trace has " + T.boundaries.toLocaleString("en") +
        " boundaries: only the first " + T.shown.toLocaleString("en") + " are shown. "));
    }
    if (L.budget_spent) add(foot, el("span", "capped", "Some payloads were left out: the page budget is spent. "));
  })();

  // ---- tree ------------------------------------------------------------------------------------------------------
  var tree = document.getElementById("tree");
  var nodes = new Array(B.length);
  var rows = new Array(B.length);
  var collapseBelow = B.length > 500 ? 1 : 6;

  B.forEach(function (b, i) {
    var node = el("div", "node");
    var row = el("div", "row" + (b.status === "ERROR" ? " error" : ""));
    row.setAttribute("role", "treeitem");
    row.tabIndex = -1;
    row.dataset.i = String(i);
    row.style.paddingLeft = (4 + 14 * depth[i]) + "px";
    var toggle = el("span", "toggle" + (children[i].length ? "" : " leaf"), children[i].length ? "▾" : "·");
    toggle.addEventListener("click", function (ev) { ev.stopPropagation(); setCollapsed(i, !isCollapsed(i)); });
    add(row, toggle, kindBadge(b));
    var name = el("span", "name", b.name);
    add(name, el("span", "idx", " [" + b.index + "]"));
    row.title = b.key;
    add(row, name);
    findingsOf[i].forEach(function (x) { add(row, el("span", "badge f-" + x.section, x.f.kind)); });
    if (modeOf[i]) add(row, el("span", "badge mode", modeOf[i]));
    if (b.status === "ERROR") add(row, statusBadge("ERROR"));
    if (b.unreplayable) add(row, el("span", "badge error", "unreplayable"));
    add(row, el("span", "dur", fmtMs(b.end - b.start)));
    row.addEventListener("click", function () { select(i, false); });
    add(node, row);
    if (children[i].length) add(node, el("div", "children"));
    if (hasErrorBelow[i]) node.classList.add("has-error");
    nodes[i] = node;
    rows[i] = row;
  });
  B.forEach(function (b, i) {
    if (b.parent >= 0 && b.parent < B.length && b.parent !== i) nodes[b.parent].lastChild.appendChild(nodes[i]);
  });
  roots.forEach(function (i) { tree.appendChild(nodes[i]); });
  for (var c = 0; c < B.length; c++) if (children[c].length && depth[c] >= collapseBelow) setCollapsed(c, true);
  if (!B.length) add(tree, el("div", "empty", "This trace has no boundary."));

  function isCollapsed(i) { return nodes[i].classList.contains("collapsed"); }
  function setCollapsed(i, yes) {
    if (!children[i].length) return;
    nodes[i].classList.toggle("collapsed", yes);
    rows[i].firstChild.textContent = yes ? "▸" : "▾";
    rows[i].setAttribute("aria-expanded", yes ? "false" : "true");
  }
  function expandTo(i) {
    var p = B[i].parent, guard = 0;
    while (p >= 0 && p < B.length && guard++ < B.length) { setCollapsed(p, false); p = B[p].parent; }
  }

  // ---- timeline --------------------------------------------------------------------------------------------------
  var timeline = document.getElementById("timeline");
  var tlRows = new Array(B.length);
  var total = Math.max(T.span, 0.001);
  (function buildTimeline() {
    if (!B.length) return;
    var axis = el("div", "tl-axis");
    add(axis, el("div", "tl-label", "timeline · " + fmtMs(T.span)));
    var ticks = el("div", "tl-ticks");
    for (var k = 0; k <= 4; k++) {
      var t = el("span", "tick" + (k === 0 ? " first" : k === 4 ? " last" : ""), fmtMs(total * k / 4));
      t.style.left = (k * 25) + "%";
      add(ticks, t);
    }
    add(axis, ticks);
    add(timeline, axis);
    var order = B.map(function (b, i) { return i; });
    order.sort(function (a, b) { return B[a].start - B[b].start || a - b; });
    order.forEach(function (i) {
      var b = B[i];
      var row = el("div", "tl-row" + (b.status === "ERROR" ? " error" : ""));
      row.dataset.i = String(i);
      var label = el("div", "tl-label", b.name);
      label.style.paddingLeft = (8 + 10 * Math.min(depth[i], 12)) + "px";
      var track = el("div", "tl-track");
      var bar = el("div", "bar k-" + b.kc + (b.status === "ERROR" ? " error" : ""));
      var left = 100 * b.start / total;
      var width = 100 * (b.end - b.start) / total;
      bar.style.left = left.toFixed(4) + "%";
      bar.style.width = width.toFixed(4) + "%";
      bar.dataset.start = String(b.start);
      bar.title = b.name + "  " + fmtMs(b.end - b.start) + "  (+" + fmtMs(b.start) + ")";
      var dur = el("span", "tl-dur", fmtMs(b.end - b.start));
      if (width >= 12) { dur.classList.add("inside"); dur.style.left = "calc(" + left.toFixed(4) + "% + 4px)"; }
      else if (left + width > 80) { dur.style.right = "calc(" + (100 - left).toFixed(4) + "% + 4px)"; }
      else { dur.style.left = "calc(" + (left + width).toFixed(4) + "% + 4px)"; }
      add(track, bar, dur);
      add(row, label, track);
      row.addEventListener("click", function () { select(i, true); });
      add(timeline, row);
      tlRows[i] = row;
    });
  })();

  // ---- details ---------------------------------------------------------------------------------------------------
  var details = document.getElementById("details");

  function highlight(pre, text, q) {
    if (!q) { pre.textContent = text; return; }
    var lower = text.toLowerCase();
    var at = 0, n = 0;
    while (n < MAX_MARKS) {
      var hit = lower.indexOf(q, at);
      if (hit < 0) break;
      if (hit > at) pre.appendChild(document.createTextNode(text.slice(at, hit)));
      pre.appendChild(el("mark", null, text.slice(hit, hit + q.length)));
      at = hit + q.length;
      n++;
    }
    if (at < text.length) pre.appendChild(document.createTextNode(text.slice(at)));
  }

  function payloadSection(title, p, isError, stack) {
    var sec = el("section", "payload" + (isError ? " error" : ""));
    sec.dataset.part = title.toLowerCase().split(" ")[0];
    var head = el("div", "p-head");
    add(head, el("h3", null, title), el("span", "spacer"));
    add(head, el("span", "size", p.size.toLocaleString("en") + " chars" + (p.status !== "ok" ? " · " + p.status : "")));
    var body = el("pre", "p-body");
    function fill() {
      body.textContent = "";
      var text = viewMode === "json" || p.readable === null ? p.json : p.readable;
      highlight(body, text, query);
    }
    if (p.readable !== null) {
      var modes = el("span", "modes");
      [["readable", "Readable"], ["json", "JSON"]].forEach(function (m) {
        var btn = el("button", null, m[1]);
        btn.type = "button";
        btn.setAttribute("aria-pressed", viewMode === m[0] ? "true" : "false");
        btn.addEventListener("click", function () { viewMode = m[0]; render(); });
        add(modes, btn);
      });
      add(head, modes);
    }
    add(sec, head);
    if (p.note) add(sec, el("div", "p-note", p.note));
    fill();
    add(sec, body);
    if (stack) {
      var st = el("details");
      add(st, el("summary", "st-head", "stack trace"));
      var pre = el("pre", "p-body stack");
      highlight(pre, stack, query);
      add(st, pre);
      add(sec, st);
    }
    return sec;
  }

  function metaRow(dl, label, value) {
    if (value === "" || value === null || value === undefined) return;
    add(dl, el("dt", null, label), el("dd", null, value));
  }

  function render() {
    details.textContent = "";
    if (selected < 0 || selected >= B.length) {
      add(details, el("div", "empty", B.length ? "Select a boundary to see its payloads." : "No boundary to show."));
      return;
    }
    var b = B[selected];
    var head = el("div", "d-head" + (b.status === "ERROR" ? " error" : ""));
    var h2 = el("h2");
    add(h2, kindBadge(b), el("span", "dname", b.name), el("span", "idx", "[" + b.index + "]"), statusBadge(b.status));
    if (modeOf[selected]) add(h2, el("span", "badge mode", modeOf[selected]));
    if (b.unreplayable) add(h2, el("span", "badge error", b.unreplayable));
    add(head, h2);
    var dl = el("dl", "meta");
    metaRow(dl, "call key", b.key);
    metaRow(dl, "function", b.function);
    metaRow(dl, "duration", fmtMs(b.end - b.start) + "  (starts at +" + fmtMs(b.start) + ")");
    metaRow(dl, "span id", b.span_id);
    if (b.stream) metaRow(dl, "stream", b.stream_state || "yes");
    metaRow(dl, "status message", b.message);
    if (b.session) {
      metaRow(dl, "session", b.session.length ? b.session.map(function (kv) { return kv[0] + " = " + kv[1]; }).join("\n") : "(none)");
    }
    add(head, dl);
    add(details, head);
    if (findingsOf[selected].length) {
      var box = el("div", "findings");
      add(box, el("h3", null, "replay report"));
      findingsOf[selected].forEach(function (x) {
        var row = el("div", "finding f-" + x.section);
        add(row, el("span", "fk", "[" + x.f.kind + "] "));
        add(row, document.createTextNode(x.f.message));
        x.f.details.forEach(function (d) { add(row, document.createTextNode("\n    " + d)); });
        add(box, row);
      });
      add(details, box);
    }
    if (b.input) add(details, payloadSection("Input", b.input, false, ""));
    if (b.output) add(details, payloadSection(b.stream ? "Output (stream items)" : "Output", b.output, false, ""));
    if (b.error) add(details, payloadSection("Error", b.error, true, b.stack));
    if (!b.input && !b.output && !b.error) add(details, el("div", "empty", "No payload was recorded for this call."));
  }

  function select(i, reveal, keepFocus) {
    if (i < 0 || i >= B.length) return;
    if (selected >= 0) {
      rows[selected].classList.remove("selected");
      rows[selected].setAttribute("aria-selected", "false");
      if (tlRows[selected]) tlRows[selected].classList.remove("selected");
    }
    selected = i;
    rows[i].classList.add("selected");
    rows[i].setAttribute("aria-selected", "true");
    if (tlRows[i]) tlRows[i].classList.add("selected");
    expandTo(i);
    if (reveal) {
      rows[i].scrollIntoView({ block: "nearest" });
      if (tlRows[i]) tlRows[i].scrollIntoView({ block: "nearest" });
    }
    if (!keepFocus) rows[i].focus({ preventScroll: true });
    try { history.replaceState(null, "", "#b" + i); } catch (e) { /* a page opened from a file may refuse it */ }
    render();
  }

  // ---- search ----------------------------------------------------------------------------------------------------
  var haystacks = new Array(B.length);
  function haystack(i) {
    if (haystacks[i] === undefined) {
      var b = B[i], parts = [b.name, b.kind, b.function, b.key, b.message];
      [b.input, b.output, b.error].forEach(function (p) { if (p) parts.push(p.json, p.readable || ""); });
      parts.push(b.stack);
      haystacks[i] = parts.join("\n").toLowerCase();
    }
    return haystacks[i];
  }
  var search = document.getElementById("search");
  var matches = document.getElementById("matches");
  function applySearch() {
    query = search.value.trim().toLowerCase();
    var shown = new Array(B.length).fill(!query);
    var count = 0;
    if (query) {
      for (var i = 0; i < B.length; i++) {
        if (haystack(i).indexOf(query) < 0) continue;
        count++;
        shown[i] = true;
        var p = B[i].parent, guard = 0;
        while (p >= 0 && p < B.length && guard++ < B.length && !shown[p]) { shown[p] = true; p = B[p].parent; }
      }
    }
    for (var j = 0; j < B.length; j++) {
      var hit = !query || haystack(j).indexOf(query) >= 0;
      nodes[j].classList.toggle("hidden", !shown[j]);
      rows[j].classList.toggle("nomatch", !hit);
      if (tlRows[j]) tlRows[j].classList.toggle("hidden", !hit);
      if (query && shown[j] && !hit) setCollapsed(j, false);
    }
    matches.textContent = query ? count + " of " + B.length : "";
    if (query && count && (selected < 0 || haystack(selected).indexOf(query) < 0)) {
      var first = -1;
      for (var k = 0; k < B.length && first < 0; k++) if (haystack(k).indexOf(query) >= 0) first = k;
      select(first, true, true);  // the search box keeps the focus
    } else {
      render();
    }
  }
  var timer = 0;
  search.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(applySearch, 120); });
  search.addEventListener("keydown", function (ev) {
    if (ev.key === "Escape") { search.value = ""; applySearch(); }
    if (ev.key === "Enter") { clearTimeout(timer); applySearch(); }
  });

  // ---- keyboard --------------------------------------------------------------------------------------------------
  function visibleRows() {
    return Array.prototype.filter.call(tree.querySelectorAll(".row"), function (r) { return r.offsetParent !== null; });
  }
  document.addEventListener("keydown", function (ev) {
    if (ev.target === search) return;
    if (ev.key === "/") { ev.preventDefault(); search.focus(); return; }
    if (selected < 0) return;
    if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      var vis = visibleRows();
      var at = vis.indexOf(rows[selected]);
      var next = vis[at + (ev.key === "ArrowDown" ? 1 : -1)];
      if (next) { ev.preventDefault(); select(Number(next.dataset.i), true); }
    } else if (ev.key === "ArrowLeft") {
      if (children[selected].length && !isCollapsed(selected)) setCollapsed(selected, true);
      else if (B[selected].parent >= 0) select(B[selected].parent, true);
    } else if (ev.key === "ArrowRight") {
      setCollapsed(selected, false);
    }
  });

  // ---- start -----------------------------------------------------------------------------------------------------
  var fromHash = /^#b(\d+)$/.exec(location.hash);
  var start = fromHash ? Number(fromHash[1]) : -1;
  if (!(start >= 0 && start < B.length)) start = B.length ? 0 : -1;
  if (start >= 0) select(start, true); else render();
  document.documentElement.dataset.ready = "true";
})();
