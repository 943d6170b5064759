"""The scenario editor's HTML, CSS and JavaScript (a Streamlit components-v2 component, inline: no
iframe, no build step, nothing fetched). ``blockviz.ui.editor`` mounts it.

In the browser: a textarea with a line-number gutter (scrolled with it); on typing, after a short
pause (``DEBOUNCE_MS``), a quick check of its own (tabs, brackets, unknown event and field names
from the schema's tables) marks the line at once, and the text goes to Python, whose loader's
verdict replaces the quick one as soon as it comes back for the same text. The marked line is
highlighted, its number flagged, the message shown beside it and in the status line. Completion
of event and field names (Ctrl+Space, or as you type a name where one belongs) comes from the
schema's tables with each name's meaning in the page's language. The browser owns the text while
the author types; Python replaces it only with a new ``seq`` (a snippet, an upload, undo).
"""
from __future__ import annotations

from blockviz.render.theme import css_vars

DEBOUNCE_MS = 250
LINE_PX = 20

HTML = """
<div class="bvx-ed" role="group">
  <div class="bvx-main">
    <div class="bvx-gutter" aria-hidden="true"><div class="bvx-nums"></div></div>
    <div class="bvx-area">
      <div class="bvx-layer" aria-hidden="true"><div class="bvx-band" hidden></div>
        <div class="bvx-beside" hidden></div></div>
      <textarea class="bvx-text" spellcheck="false" wrap="off" autocapitalize="off"
                autocomplete="off" autocorrect="off"></textarea>
      <ul class="bvx-pop" role="listbox" hidden></ul>
    </div>
  </div>
  <div class="bvx-status" role="status" aria-live="polite"></div>
</div>
"""

# the palette, then the editor's rules (their colours: var(--bv-*))
CSS = css_vars(":host") + f"""
.bvx-ed {{ font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13.5px;
          border: 1px solid var(--bv-border); border-radius: .45rem; overflow: hidden;
          background: var(--bv-paper); color: var(--bv-ink); }}
.bvx-ed:focus-within {{ border-color: var(--bv-blue-focus); box-shadow: 0 0 0 2px var(--bv-blue-select); }}
.bvx-main {{ display: flex; position: relative; }}
.bvx-gutter {{ flex: 0 0 auto; min-width: 3.2em; background: var(--bv-panel);
              border-right: 1px solid var(--bv-rule); overflow: hidden; position: relative;
              user-select: none; }}
.bvx-nums {{ padding: 8px 0; }}
.bvx-nums div {{ height: {LINE_PX}px; line-height: {LINE_PX}px; padding: 0 .5em 0 .4em; text-align: right;
                color: var(--bv-faint); }}
.bvx-nums div.bvx-bad {{ background: var(--bv-red); color: var(--bv-paper); font-weight: 700; }}
.bvx-area {{ position: relative; flex: 1 1 auto; min-width: 0; }}
.bvx-text {{ display: block; width: 100%; box-sizing: border-box; border: 0; outline: 0; resize: vertical;
            margin: 0; padding: 8px 10px; font: inherit; line-height: {LINE_PX}px; white-space: pre;
            overflow: auto; tab-size: 2; background: transparent; color: inherit; position: relative;
            z-index: 1; }}
.bvx-layer {{ position: absolute; inset: 0; overflow: hidden; pointer-events: none; }}
.bvx-band {{ position: absolute; left: 0; right: 0; height: {LINE_PX}px; background: var(--bv-red-bg);
            box-shadow: inset 3px 0 0 var(--bv-red); }}
.bvx-beside {{ position: absolute; right: 6px; max-width: 60%; height: {LINE_PX - 2}px;
              line-height: {LINE_PX - 2}px; padding: 0 .5em; border-radius: 4px; background: var(--bv-red);
              color: var(--bv-paper); font-size: 12px; white-space: nowrap; overflow: hidden;
              text-overflow: ellipsis; z-index: 2; opacity: .93; }}
.bvx-status {{ border-top: 1px solid var(--bv-rule); padding: 3px 10px; font-size: 12.5px; min-height: 1.4em;
              background: var(--bv-panel); white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }}
.bvx-status.bvx-err {{ color: var(--bv-red); font-weight: 600; }}
.bvx-status.bvx-ok {{ color: var(--bv-green); }}
.bvx-status .bvx-hint {{ float: right; color: var(--bv-faint); font-weight: 400; }}
.bvx-pop {{ position: absolute; z-index: 5; margin: 0; padding: 2px 0; list-style: none;
           background: var(--bv-paper); border: 1px solid var(--bv-border); border-radius: 6px;
           box-shadow: 0 4px 14px var(--bv-shadow);
           max-height: 232px; overflow-y: auto; min-width: 16em; max-width: 30em; font-size: 12.5px; }}
.bvx-pop li {{ padding: 3px 8px; cursor: pointer; }}
.bvx-pop li b {{ color: var(--bv-blue); }}
.bvx-pop li span {{ color: var(--bv-faint); margin-left: .6em; }}
.bvx-pop li div {{ color: var(--bv-muted); font-family: system-ui, sans-serif; white-space: normal; }}
.bvx-pop li[aria-selected="true"] {{ background: var(--bv-blue-select); }}
"""

JS = """
const LH = __LH__, DEBOUNCE = __DEBOUNCE__;

function esc(s) {
  return String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
}

// ---- where the caret is: which table of names applies ------------------------------------------
const PARENTS = {config: "config", model: "model", connector: "connector", scheduler: "scheduler",
                 arrive: "arrive", decode: "decode", prompt: "part"};

function blockParent(lines, i, indent) {
  // the key of the nearest line above with a smaller indent (`config:`, `  - arrive:`): "" at the
  // top level, null under a key whose value is written on its own line (`title: {...}`)
  for (let j = i - 1; j >= 0; j--) {
    const l = lines[j];
    if (!l.trim() || /^\\s*#/.test(l)) continue;
    const ind = l.match(/^\\s*/)[0].length;
    if (ind < indent) {
      const m = l.match(/^\\s*(?:-\\s+)?([A-Za-z_][\\w-]*)\\s*:\\s*(#.*)?$/);
      return m ? m[1] : null;
    }
  }
  return indent === 0 ? "" : null;
}

function flowParent(before) {
  // the key before the innermost unclosed `{` of this line (`arrive: {id: A, pro|`)
  let depth = 0;
  for (let i = before.length - 1; i >= 0; i--) {
    const c = before[i];
    if (c === "}" || c === "]") depth++;
    else if (c === "[") { if (depth) depth--; }
    else if (c === "{") {
      if (depth) { depth--; continue; }
      const head = before.slice(0, i);
      const m = head.match(/([A-Za-z_][\\w-]*)\\s*:\\s*$/)
             || head.match(/([A-Za-z_][\\w-]*)\\s*:\\s*\\[[^\\]]*$/);     // prompt: [{..}, {
      return m ? m[1] : null;
    }
  }
  return undefined;                                            // not inside a flow mapping
}

function context(lines, i, col) {
  const line = lines[i], before = line.slice(0, col);
  let m = before.match(/^\\s*-\\s+([A-Za-z_]*)$/);
  if (m) {
    const ind = before.match(/^\\s*/)[0].length;
    const parent = blockParent(lines, i, ind);
    if (parent === "steps" || parent === null) return {table: "events", prefix: m[1]};
  }
  m = before.match(/[{,]\\s*([A-Za-z_]*)$/);
  if (m) {
    const parent = flowParent(before.slice(0, before.length - m[1].length));
    if (parent && PARENTS[parent]) return {table: PARENTS[parent], prefix: m[1]};
  }
  m = before.match(/^(\\s*)(?:-\\s+)?([A-Za-z_]*)$/);
  if (m) {
    const dash = before.match(/^\\s*-\\s+/);
    const ind = dash ? dash[0].length : m[1].length;
    const parent = blockParent(lines, i, ind);
    if (parent === "") return {table: "scenario", prefix: m[2]};
    if (parent && PARENTS[parent]) return {table: PARENTS[parent], prefix: m[2]};
  }
  return null;
}

// ---- the quick check, in the browser: what needs no YAML parser ------------------------------
function quickCheck(text, words, L) {
  const lines = text.split("\\n");
  const events = new Set(words.events.map(e => e.label));
  const names = t => new Set((words[t] || []).map(e => e.label));
  let top = null;
  const stack = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const tab = line.match(/^ *\\t/);
    if (tab) return {line: i + 1, col: tab[0].length, msg: L.q_tab};
    if (/^\\s*#/.test(line)) continue;
    const key = line.match(/^([A-Za-z_][\\w-]*)\\s*:/);
    if (key) {
      top = key[1];
      if (!names("scenario").has(top)) return {line: i + 1, col: 1, msg: L.q_field.replace("{f}", top)};
    }
    const ev = line.match(/^(\\s*)-\\s+([A-Za-z_]\\w*)\\s*(:|$|\\s#)/);
    const evParent = ev ? blockParent(lines, i, ev[1].length) : null;
    if (ev && top === "steps" && !events.has(ev[2]) && (evParent === "steps" || evParent === "")) {
      return {line: i + 1, col: ev[1].length + 3, msg: L.q_event.replace("{e}", ev[2])};
    }
    const sub = line.match(/^(\\s+)(?:-\\s+)?([A-Za-z_][\\w-]*)\\s*:/);
    if (sub && !ev) {
      const ind = sub[0].indexOf(sub[2]);
      const parent = blockParent(lines, i, ind);
      const table = parent && PARENTS[parent];
      if (table && table !== "part" && !names(table).has(sub[2])) {
        return {line: i + 1, col: ind + 1, msg: L.q_field.replace("{f}", sub[2])};
      }
    }
    // brackets and quotes of flow collections
    let q = null;
    for (let c = 0; c < line.length; c++) {
      const ch = line[c];
      if (q) { if (ch === q && line[c - 1] !== "\\\\") q = null; continue; }
      if (ch === "#" && (c === 0 || /\\s/.test(line[c - 1]))) break;
      if (ch === '"' || (ch === "'" && (c === 0 || /[\\s\\[{,:]/.test(line[c - 1])))) { q = ch; continue; }
      if (ch === "[" || ch === "{") stack.push([ch, i, c]);
      else if (ch === "]" || ch === "}") {
        const open = stack.pop();
        if (!open || (open[0] === "[") !== (ch === "]")) {
          return {line: i + 1, col: c + 1, msg: L.q_close.replace("{c}", ch)};
        }
      }
    }
    if (q === '"') return {line: i + 1, col: line.indexOf('"') + 1, msg: L.q_quote};
  }
  if (stack.length) {
    const [ch, i, c] = stack[stack.length - 1];
    return {line: i + 1, col: c + 1, msg: L.q_open.replace("{c}", ch === "[" ? "]" : "}")};
  }
  return null;
}

function setup(root, api) {
  const ta = root.querySelector(".bvx-text"), nums = root.querySelector(".bvx-nums");
  const gutter = root.querySelector(".bvx-gutter"), layer = root.querySelector(".bvx-layer");
  const band = root.querySelector(".bvx-band"), beside = root.querySelector(".bvx-beside");
  const status = root.querySelector(".bvx-status"), pop = root.querySelector(".bvx-pop");
  const ed = {seq: null, data: null, timer: null, n: 0, mark: null, count: 0, items: [], sel: 0,
              ctx: null, pending: false, sent: null};

  function lineCount() { return ta.value.split("\\n").length; }

  function drawNums() {
    const n = lineCount();
    if (n !== ed.count) {
      let html = "";
      for (let i = 1; i <= n; i++) html += `<div data-line="${i}">${i}</div>`;
      nums.innerHTML = html;
      ed.count = n;
      const w = String(n).length;
      gutter.style.minWidth = `${Math.max(3.2, w * 0.62 + 1.6)}em`;
    }
    drawMark();
  }

  function sync() {
    nums.style.transform = `translateY(${-ta.scrollTop}px)`;
    placeBand();
    if (!pop.hidden) placePop();
  }

  function placeBand() {
    if (!ed.mark) return;
    const top = 8 + (ed.mark.line - 1) * LH - ta.scrollTop;
    band.style.top = `${top}px`;
    beside.style.top = `${top + 1}px`;
  }

  function drawMark() {
    const m = ed.mark;
    for (const el of nums.querySelectorAll(".bvx-bad")) el.classList.remove("bvx-bad");
    const L = (ed.data || {}).labels || {};
    if (!m) {
      band.hidden = beside.hidden = true;
      root.dataset.markLine = "";
      status.className = "bvx-status " + (ed.pending ? "" : "bvx-ok");
      status.innerHTML = `${esc(ed.pending ? L.checking : L.ok)}`
                       + `<span class="bvx-hint">${esc(L.hint || "")}</span>`;
      return;
    }
    const line = Math.max(1, Math.min(m.line, lineCount()));
    const num = nums.children[line - 1];
    if (num) num.classList.add("bvx-bad");
    band.hidden = beside.hidden = false;
    beside.textContent = m.msg;
    beside.title = m.msg;
    root.dataset.markLine = String(line);
    root.dataset.markFrom = m.from;
    status.className = "bvx-status bvx-err";
    status.innerHTML = `${esc(L.line.replace("{line}", line))}${m.col ? ":" + m.col : ""} · ${esc(m.msg)}`
                     + (m.from === "browser" ? ` <span class="bvx-hint">${esc(L.browser)}</span>` : "");
    status.title = m.msg;
    placeBand();
  }

  function check() {
    // Python's verdict for the text it checked, when that is the text in the editor; else the
    // quick check, until Python's comes
    const d = ed.data;
    if (d && d.text === ta.value) {
      ed.mark = d.mark ? {...d.mark, from: "python"} : null;
      ed.pending = false;
    } else {
      const q = d ? quickCheck(ta.value, d.words, d.labels) : null;
      ed.mark = q ? {...q, from: "browser"} : null;
      ed.pending = true;
    }
    drawMark();
  }

  function send() {
    clearTimeout(ed.timer);
    ed.timer = null;
    if (ed.sent === ta.value) return;
    ed.sent = ta.value;
    ed.n += 1;
    api.set("edit", {text: ta.value, n: ed.n});
  }

  function schedule() {
    drawNums();
    clearTimeout(ed.timer);
    ed.timer = setTimeout(() => { check(); send(); }, DEBOUNCE);
  }

  // ---- completion ----------------------------------------------------------------------------
  function caret() {
    const pos = ta.selectionStart, before = ta.value.slice(0, pos);
    const i = before.split("\\n").length - 1;
    return {pos, i, col: pos - (before.lastIndexOf("\\n") + 1)};
  }

  function charWidth() {
    if (!ed.cw) {
      const s = document.createElement("span");
      s.textContent = "0".repeat(40);
      s.style.cssText = "position:absolute;visibility:hidden;white-space:pre;font:inherit";
      ta.parentElement.appendChild(s);
      ed.cw = s.getBoundingClientRect().width / 40 || 8;
      s.remove();
    }
    return ed.cw;
  }

  function placePop() {
    const {i, col} = caret();
    pop.style.top = `${8 + (i + 1) * LH - ta.scrollTop + 2}px`;
    pop.style.left = `${Math.max(0, 10 + col * charWidth() - ta.scrollLeft - 8)}px`;
  }

  function openPop(force) {
    if (!ed.data) return;
    const {i, col} = caret();
    const lines = ta.value.split("\\n");
    const ctx = context(lines, i, col);
    if (!ctx || (!force && !ctx.prefix)) return closePop();
    const lang = ed.data.lang, p = ctx.prefix.toLowerCase();
    const items = (ed.data.words[ctx.table] || []).filter(e => e.label.toLowerCase().startsWith(p));
    if (!items.length || (items.length === 1 && items[0].label === ctx.prefix)) return closePop();
    ed.items = items; ed.ctx = ctx; ed.sel = 0;
    pop.innerHTML = items.map((e, k) => `<li role="option" id="bvx-opt-${k}" data-label="${esc(e.label)}" `
      + `aria-selected="${k === 0}"><b>${esc(e.label)}</b><span>${esc(e.detail || "")}</span>`
      + `<div>${esc(e[lang] || e.en || "")}</div></li>`).join("");
    pop.hidden = false;
    ta.setAttribute("aria-expanded", "true");
    placePop();
  }

  function closePop() {
    pop.hidden = true;
    ed.items = [];
    ta.setAttribute("aria-expanded", "false");
  }

  function choose(k) {
    const sel = pop.children;
    if (!sel.length) return;
    ed.sel = (k + sel.length) % sel.length;
    for (let j = 0; j < sel.length; j++) sel[j].setAttribute("aria-selected", String(j === ed.sel));
    sel[ed.sel].scrollIntoView({block: "nearest"});
  }

  function accept(k) {
    const e = ed.items[k];
    if (!e) return closePop();
    const {pos} = caret();
    const start = pos - ed.ctx.prefix.length;
    const bare = ed.ctx.table === "events" && !e.detail;
    const after = ta.value.slice(pos);
    const insert = e.label + (bare || /^\\s*:/.test(after) ? "" : ": ");
    ta.setRangeText(insert, start, pos, "end");
    closePop();
    schedule();
  }

  ta.addEventListener("input", () => { schedule(); openPop(false); });
  ta.addEventListener("scroll", sync);
  ta.addEventListener("blur", () => { setTimeout(closePop, 150); if (ed.timer) { check(); send(); } });
  ta.addEventListener("click", closePop);
  ta.addEventListener("keydown", ev => {
    if (!pop.hidden && ed.items.length) {
      if (ev.key === "ArrowDown") { ev.preventDefault(); return choose(ed.sel + 1); }
      if (ev.key === "ArrowUp") { ev.preventDefault(); return choose(ed.sel - 1); }
      if (ev.key === "Enter" || ev.key === "Tab") { ev.preventDefault(); return accept(ed.sel); }
      if (ev.key === "Escape") { ev.preventDefault(); return closePop(); }
    }
    if (ev.key === " " && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); return openPop(true); }
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); check(); send(); }
  });
  pop.addEventListener("mousedown", ev => {
    const li = ev.target.closest("li");
    if (!li) return;
    ev.preventDefault();
    accept([...pop.children].indexOf(li));
  });

  ed.update = (data, set) => {
    api.set = set;
    ed.data = data;
    ta.setAttribute("aria-label", data.labels.aria);
    ta.style.height = `${data.height}px`;
    if (data.seq !== ed.seq) {                       // Python replaced the text (or the first mount)
      const keep = ta.selectionStart;
      ed.seq = data.seq;
      if (ta.value !== data.text) {
        ta.value = data.text;
        ta.selectionStart = ta.selectionEnd = Math.min(keep, data.text.length);
      }
      ed.sent = data.text;
      clearTimeout(ed.timer); ed.timer = null;
    }
    drawNums();
    if (!ed.timer) check();                           // typing since: the verdict waits
    sync();
  };
  return ed;
}

export default function (component) {
  const { data, parentElement, setStateValue } = component;
  const root = parentElement.querySelector(".bvx-ed");
  if (!root) return;
  if (!root.__bvx) root.__bvx = setup(root, {set: setStateValue});
  root.__bvx.update(data, setStateValue);
}
""".replace("__LH__", str(LINE_PX)).replace("__DEBOUNCE__", str(DEBOUNCE_MS))
