// The board: every panel of a step on one screen, stepped in the browser.
// Used two ways with the same code: as a Streamlit components-v2 component (the player and the
// Author preview), and in the offline HTML export, where a few lines call it with the data inlined.
// It receives pre-rendered, escaped panel HTML (blockviz.render.step) in a string pool — the board's
// data, blockviz.render.board.BoardData, every field under its Python name — lays it out,
// fits it to the viewport, steps with keys and buttons, follows and writes the URL, animates the
// change (blocks slide between the free queue and the request tables) and links the panels.
// Python learns the step through setStateValue("pos"), debounced, so a burst of keys is one rerun.

const DEBOUNCE_MS = 250;
const MOVE_MS = 420;
const CARD_EM = 6.6;          // a block card's least width (its font's em): `ref_cnt 1→0` on one line
const BOARDS = new WeakMap();
const svg = (d) => `<svg viewBox="0 0 24 24" width="1.1em" height="1.1em" aria-hidden="true"><path d="${d}" fill="currentColor"/></svg>`;
const ICONS = {
  first: svg('M6 5h2.5v14H6zM20 5v14L9.5 12z'), prev: svg('M17 5v14L6 12z'), play: svg('M7 5v14l12-7z'),
  pause: svg('M6 5h4v14H6zM14 5h4v14h-4z'), next: svg('M7 5v14l11-7z'), last: svg('M15.5 5H18v14h-2.5zM4 5v14l10.5-7z'),
};      // the component's parent element -> its board state
const TYPING = 'input, textarea, select, [contenteditable=""], [contenteditable="true"], ' +
  '[role="tab"], [role="slider"], [role="radiogroup"], [role="radio"], [role="listbox"], ' +
  '[role="option"], [role="combobox"], [role="spinbutton"]';

let lastText = null, lastData = null;

// component.data is {board, control}: the board's data (BoardData: the app sends it as one cached
// JSON text, an exported page as an object) and what the page tells the board now (BoardControl)
export default function board(component) {
  const { parentElement } = component;
  let { board: data, control } = component.data || {};
  if (typeof data === 'string') {
    if (data !== lastText) { lastText = data; lastData = JSON.parse(data); }
    data = lastData;
  }
  let b = BOARDS.get(parentElement);
  if (!b) {
    b = create(parentElement, component);
    BOARDS.set(parentElement, b);
  }
  b.api = component;
  b.load(data || {}, control || {});
  return () => { b.destroy(); BOARDS.delete(parentElement); };
}

function el(tag, cls, attrs) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (attrs) for (const k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}

// -- morph: a panel becomes its new HTML by changing only what differs. Replacing a panel's
// innerHTML made the browser build, style, shape and lay out every node again each step (at 4,096
// blocks ~1,500 nodes, most of them the same as the step before). Rows keyed by their request or
// hash move as a whole; a node that plays an animation is replaced, so that it plays again.
const TEMPLATE = document.createElement('template');
const ANIMATED = /\b(bv-now|bv-row-new|bv-row-gone)\b/;
const keyOf = (n) => (n.nodeType === 1 ? n.getAttribute('data-request') ?? n.getAttribute('data-hash') : null);

function morph(e, html) {
  if (!e.firstChild) { e.innerHTML = html; return; }
  TEMPLATE.innerHTML = html;
  morphChildren(e, TEMPLATE.content);
}

function morphChildren(a, b) {
  let keyed = null;
  for (let o = a.firstChild; o; o = o.nextSibling) {
    const k = keyOf(o);
    if (k !== null) (keyed ||= new Map()).set(k, o);
  }
  if (keyed) {
    // a keyed node the new list lacks (a request that finished, last step's evicted hashes)
    // leaves first: kept until the end, it held the cursor back, and every row after it was
    // moved before it — taken out and put back, restyled and laid out anew (at 4,096 blocks
    // the whole hash table and most of the requests, each step)
    const want = new Set();
    for (let nn = b.firstChild; nn; nn = nn.nextSibling) {
      const k = keyOf(nn);
      if (k !== null) want.add(k);
    }
    for (let o = a.firstChild; o;) {
      const next = o.nextSibling, k = keyOf(o);
      if (k !== null && (!want.has(k) || keyed.get(k) !== o)) {    // (or an earlier duplicate)
        if (keyed.get(k) === o) keyed.delete(k);
        o.remove();
      }
      o = next;
    }
  }
  let cur = a.firstChild;
  for (let nn = b.firstChild; nn;) {
    const next = nn.nextSibling, k = keyOf(nn);
    let o = null;
    if (k !== null) {
      o = keyed && keyed.get(k) || null;
      if (o) keyed.delete(k);
    } else if (cur && keyOf(cur) === null && cur.nodeType === nn.nodeType && cur.nodeName === nn.nodeName) {
      o = cur;
    }
    if (o && o.nodeName === nn.nodeName) {
      if (o === cur) cur = cur.nextSibling; else a.insertBefore(o, cur);
      morphNode(o, nn);
    } else {
      a.insertBefore(nn, cur);                 // taken from the template
    }
    nn = next;
  }
  while (cur) { const gone = cur; cur = cur.nextSibling; gone.remove(); }
}

function morphNode(a, b) {
  if (a.nodeType !== 1) {
    if (a.nodeValue !== b.nodeValue) a.nodeValue = b.nodeValue;
    return;
  }
  if (a.isEqualNode(b)) return;
  if (ANIMATED.test(b.getAttribute('class') || '')) { a.replaceWith(b); return; }
  // (by name: reading .attributes makes an Attr node for each attribute of each node compared)
  for (const k of a.getAttributeNames()) if (!b.hasAttribute(k)) a.removeAttribute(k);
  for (const k of b.getAttributeNames()) {
    const v = b.getAttribute(k);
    if (a.getAttribute(k) !== v) a.setAttribute(k, v);
  }
  morphChildren(a, b);
}

function create(parent, component) {
  const root = el('div', 'bvb', { 'data-bv': 'board', 'data-bv-step': '0', tabindex: '-1' });
  root.innerHTML = `
    <div class="bvb-bar">
      <div class="bvb-btns" role="toolbar">
        <button type="button" data-act="first">${ICONS.first}</button>
        <button type="button" data-act="prev">${ICONS.prev}</button>
        <button type="button" data-act="play" class="bvb-play">${ICONS.play}</button>
        <button type="button" data-act="next">${ICONS.next}</button>
        <button type="button" data-act="last">${ICONS.last}</button>
      </div>
      <div class="bvb-head" data-bv="header"></div>
      <div class="bvb-marks" data-bv="timeline" role="list"></div>
      <div class="bvb-tools">
        <button type="button" data-act="why" class="bvb-whyb" aria-expanded="false"></button>
        <button type="button" data-act="into" class="bvb-into" aria-pressed="false"></button>
        <button type="button" data-act="lang" class="bvb-lang"></button>
      </div>
    </div>
    <div class="bvb-cap" data-bv="caption" aria-live="polite"></div>
    <div class="bvb-grid">
      <div class="bvb-col bvb-left">
        <section class="bvb-p bvb-blocks" data-bv="blocks"><div class="bvb-t" data-t="gpu_blocks"></div>
          <div class="bvb-body"></div></section>
        <section class="bvb-p bvb-ext" data-bv="external" hidden><div class="bvb-t"
          data-t="external_tier"></div><div class="bvb-body"></div></section>
        <section class="bvb-p bvb-reqs" data-bv="requests"><div class="bvb-t" data-t="requests"></div>
          <div class="bvb-body"></div></section>
      </div>
      <div class="bvb-col bvb-right">
        <section class="bvb-p bvb-ops" data-bv="ops"><div class="bvb-t" data-t="board_ops"><span
          class="bvb-page" role="status"></span></div><div class="bvb-body"></div></section>
        <section class="bvb-p bvb-table" data-bv="hash-table"><div class="bvb-t" data-t="hash_table"></div>
          <div class="bvb-body"></div></section>
      </div>
      <section class="bvb-p bvb-queue" data-bv="free-queue"><div class="bvb-t" data-t="free_queue"
        data-hint="free_queue_hint"></div><div class="bvb-body"></div></section>
      <aside class="bvb-why" data-bv="why" hidden><div class="bvb-t"><span data-t="board_why_title"></span>
        <button type="button" data-act="why" class="bvb-x" data-label="board_close">×</button></div>
        <div class="bvb-body"></div><div class="bvb-why-legend"></div></aside>
    </div>
    <div class="bvb-foot"><div class="bvb-legend"></div><span class="bvb-keys"></span><span class="bvb-tip"
      role="status"></span></div>`;
  parent.appendChild(root);
  const q = (s) => root.querySelector(s);
  const part = {
    head: q('.bvb-head'), marks: q('.bvb-marks'), cap: q('.bvb-cap'), grid: q('.bvb-grid'),
    blocks: q('.bvb-blocks .bvb-body'), legend: q('.bvb-legend'), right: q('.bvb-right'),
    ops: q('.bvb-ops .bvb-body'), page: q('.bvb-page'), why: q('.bvb-why .bvb-body'), whyBox: q('.bvb-why'),
    whyLegend: q('.bvb-why-legend'), reqsBox: q('.bvb-reqs'), left: q('.bvb-left'),
    table: q('.bvb-table .bvb-body'), queue: q('.bvb-queue .bvb-body'), reqs: q('.bvb-reqs .bvb-body'),
    ext: q('.bvb-ext .bvb-body'), extBox: q('.bvb-ext'), keys: q('.bvb-keys'), tip: q('.bvb-tip'),
    into: q('.bvb-into'), lang: q('.bvb-lang'), play: q('.bvb-play'), whyBtn: q('.bvb-whyb'),
  };
  const code = el('li', 'bv-codeli');          // step into: the op's pseudocode, under its line
  const st = {
    data: null, control: {}, step: 0, frame: null, lang: 'en', playing: false, timer: 0, seq: null,
    dataLang: null, sent: '', debounce: 0, scale: 1, fitKey: '', lit: null, want: -1, fits: 0,
    why: false, page: 0, pages: 1, opsKey: '', opsH: -1, unfold: new Set(), fitted: false, cols: '',
    hOf: '', heights: new Map(),          // the op lines' heights measured, at a scale and width
  };
  const b = { api: component, root };

  const S = (i) => (i === undefined || i === null ? '' : st.data.strings[i]);
  const d = () => st.data;
  const stepsOf = (lang) => d().steps[lang] || d().steps[d().langs[0]];
  const inWindow = (k) => k >= d().lo && k <= d().hi;
  const framesOf = () => d().frames && (d().frames[st.lang] || d().frames[d().langs[0]]);
  const nFrames = (k) => {
    const f = framesOf();
    return f && inWindow(k) ? f[k - d().lo].length : 0;
  };
  const hasFrames = () => !!framesOf();
  const flag = (f) => d().url === 'hash' && new RegExp(`[#&]${f}(&|$)`).test(window.location.hash);
  const reduced = () => (window.matchMedia && window.matchMedia('(prefers-reduced-motion: reduce)').matches) ||
    (st.playing && d().speed > 2) || flag('still') || !!d().dense;   // a big pool: no slides
  const presenting = () => !!(d().presenter || flag('present'));

  // -- drawing ------------------------------------------------------------------------------
  // Every panel and label remembers what it was last given (e.__bv), and a write that would
  // change nothing is skipped: even an equal value dirties style and layout, and the fit draws
  // many steps in a row. A pool index is good only for the data it came with.
  function once(e, key, data, write) {
    if (e.__bv === key && e.__bvData === data) return;
    e.__bv = key; e.__bvData = data;
    write();
  }
  const put = (e, i) => once(e, `p${st.lang}:${i}`, st.data, () => morph(e, S(i)));
  const setText = (e, t) => once(e, `t${t}`, null, () => { e.textContent = t; });
  const setHtml = (e, h) => once(e, `h${h}`, null, () => { e.innerHTML = h; });
  function setAttr(e, k, v) {
    if (v === null) { if (e.hasAttribute(k)) e.removeAttribute(k); } else if (e.getAttribute(k) !== v) e.setAttribute(k, v);
  }

  function record(k, frame) {
    const rec = stepsOf(st.lang)[k - d().lo];
    if (frame === null || !hasFrames()) return [rec, null];
    const fr = framesOf()[k - d().lo];
    return [rec, fr.length ? fr[Math.min(frame, fr.length - 1)] : null];
  }

  function positions() {
    // where each block is drawn in the panels it moves between (queue, request tables)
    const at = new Map();
    for (const sel of ['.bvb-queue [data-block]', '.bvb-reqs [data-block]']) {
      for (const e of root.querySelectorAll(sel)) {
        const id = e.getAttribute('data-block');
        if (!at.has(id)) at.set(id, e.getBoundingClientRect());
      }
    }
    return at;
  }

  function slide(before) {
    if (reduced() || !before || !Element.prototype.animate) return;
    const seen = new Set();
    for (const sel of ['.bvb-queue [data-block]', '.bvb-reqs [data-block]']) {
      for (const e of root.querySelectorAll(sel)) {
        const id = e.getAttribute('data-block');
        if (seen.has(id)) continue;
        seen.add(id);
        const old = before.get(id);
        if (!old) continue;
        const now = e.getBoundingClientRect();
        const dx = old.left - now.left, dy = old.top - now.top;
        if (Math.abs(dx) < 2 && Math.abs(dy) < 2) continue;
        e.animate([{ transform: `translate(${dx}px, ${dy}px)`, zIndex: 3 },
                   { transform: 'translate(0, 0)', zIndex: 3 }],
                  { duration: MOVE_MS, easing: 'cubic-bezier(.2,.7,.2,1)' });
      }
    }
  }

  // The titles of the panels and the buttons' words, once per language.
  function labels(ui) {
    if (st.titles === ui) return;
    st.titles = ui;
    for (const t of root.querySelectorAll('[data-t]')) {
      const hint = t.getAttribute('data-hint'), keep = t.querySelector('.bvb-page');
      t.textContent = '';
      t.append(document.createTextNode(ui[t.getAttribute('data-t')] || ''));
      if (hint) { const s = el('small'); s.textContent = ui[hint]; t.append(s); }
      if (keep) t.append(keep);
    }
    for (const x of root.querySelectorAll('[data-label]')) {
      x.title = ui[x.getAttribute('data-label')] || ''; x.setAttribute('aria-label', x.title);
    }
  }

  // A fit draws only what decides the board's height: the caption and the left column.
  function draw(animate, fitting) {
    if (!d() || !d().num_steps) return;
    const k = st.step;
    const ui = d().ui[st.lang] || d().ui[d().langs[0]];
    labels(ui);
    if (!inWindow(k)) {
      setText(part.head, ui.board_loading);
      return;
    }
    const [rec, fr] = record(k, st.frame);
    const show = fr || rec;
    put(part.cap, show.caption);
    if (d().dense) dense(k); else { put(part.blocks, show.blocks); balance(); }
    put(part.queue, show.queue);
    if (part.extBox.hidden !== !d().external) part.extBox.hidden = !d().external;
    if (d().external) put(part.ext, rec.external);
    if (fitting) return;
    const before = animate && !reduced() ? positions() : null;   // (a layout: only to slide)
    setAttr(root, 'data-bv-step', String(k));
    setAttr(root, 'data-bv-frame', st.frame === null ? '' : String(st.frame));
    setAttr(root, 'data-bv-op', st.frame === null ? null : String(st.frame));
    setAttr(root, 'lang', st.lang === 'zh' ? 'zh-CN' : 'en');
    root.classList.toggle('bvb-still', reduced());
    root.classList.toggle('bvb-into-on', st.frame !== null);
    root.classList.toggle('bvb-dense-on', !!d().dense);
    root.classList.toggle('bvb-present', presenting());
    put(part.head, show.header);
    // (the step-into line's code leaves the list before a new step's lines come in: morph would
    // take it for a line and keep it, as that line, pseudocode inside)
    if (code.isConnected && (part.ops.__bv !== `p${st.lang}:${rec.ops}` || part.ops.__bvData !== st.data)) {
      code.remove(); st.opsKey = '';
    }
    put(part.ops, rec.ops);
    keyOps();
    put(part.why, rec.why);
    put(part.table, show.table);
    put(part.reqs, show.requests);        // an op frame carries its own requests
    const legend = d().legend[st.lang] || d().legend[d().langs[0]];
    setHtml(presenting() ? part.whyLegend : part.legend, legend);   // presenter mode: behind "why?"
    setHtml(presenting() ? part.legend : part.whyLegend, '');
    if (part.whyBox.hidden !== !st.why) part.whyBox.hidden = !st.why;
    setAttr(part.whyBtn, 'aria-expanded', String(st.why));
    part.whyBtn.classList.toggle('bvb-on', st.why);
    const ans = st.control.answer;                // a self-check answer, outlined at its step
    for (const e of root.querySelectorAll('.bv-answer')) e.classList.remove('bv-answer');
    if (ans && ans.step === k) {
      const want = new Set(ans.ids.map(String));
      for (const e of root.querySelectorAll('[data-block]')) {
        if (want.has(e.getAttribute('data-block'))) e.classList.add('bv-answer');
      }
    }
    drawMarks();
    drawButtons(ui);
    const shown = opsLayout(fr ? S(fr.code) : null, ui);
    fadeFoot();                          // (its reads before the ops' writes: one layout for both)
    if (shown) shown();
    if (st.lit) light(st.lit);
    slide(before);
  }

  // the step's key operation: the op lines whose vLLM call the caption names (`touch`,
  // `get_new_blocks`, `free_blocks`) are marked, so the eye goes from the sentence to its line
  function keyOps() {
    const said = part.cap.textContent;
    for (const li of part.ops.querySelectorAll('.bv-opl')) {
      const call = li.querySelector('.bv-call');
      const m = call && /([A-Za-z_][\w.]*)\s*(?:\(|$)/.exec(call.textContent.trim());
      const name = m ? m[1] : '';
      const word = new RegExp(`(^|[^\\w.])${name.replace(/\./g, '\\.')}($|[^\\w])`);
      li.classList.toggle('bv-key', name.length > 3 && word.test(said));
    }
  }

  // the hash table and the requests scroll in their panel: while more is below, the panel's foot
  // fades out, so a row cut by the panel's edge reads as "more below", not as a broken row
  function fadeFoot(e) {
    // a step's changed request below the panel's fold (B finishing under A) scrolls into it
    const row = !e && part.reqs.querySelector('.bv-req-changed');
    if (row) {
      const r = row.getBoundingClientRect(), box = part.reqs.getBoundingClientRect();
      if (r.bottom > box.bottom + 1) part.reqs.scrollTop += Math.min(r.bottom - box.bottom, r.top - box.top);
    }
    for (const b of [part.table, part.reqs]) {
      b.classList.toggle('bvb-more', b.scrollTop + b.clientHeight < b.scrollHeight - 1);
    }
  }
  part.table.addEventListener('scroll', fadeFoot, { passive: true });
  part.reqs.addEventListener('scroll', fadeFoot, { passive: true });

  // -- the cards in balanced rows: as many columns as fit, then as few as keep the rows' count
  // (no lone card on a row); the null block is a narrow column of its own
  function balance() {
    const grid = part.blocks.querySelector('.bv-blocks');
    if (!grid) return;
    const n = grid.children.length - (grid.querySelector('.bv-null') ? 1 : 0);
    // the columns follow the board's width and scale (each fit measures the width once): a step
    // that keeps them reads no layout here (reading it made every step of a fit lay out twice)
    const key = `${st.boxW}|${st.scale}|${n}|${st.lang}`;
    if (part.blocks.__bvCols === key) return;
    part.blocks.__bvCols = key;
    const w = part.blocks.clientWidth, fs = parseFloat(getComputedStyle(grid).fontSize) || 16;
    // the least card: a card of this run at its widest (its largest id and hash label, a count
    // that changed, two holders) drawn once, hidden, and measured, so the columns hold at every step
    let need = CARD_EM * fs;
    const model = grid.querySelector('.bv-card:not(.bv-null)');
    if (model) {
      const c = model.cloneNode(true);
      c.style.cssText = 'position:absolute;visibility:hidden;width:max-content;left:0;top:0';
      c.classList.remove('bv-changed');
      for (const x of c.querySelectorAll('.bv-tok, .bv-tags')) x.remove();   // (they clip; not sized)
      const id = c.querySelector('.bv-id'), top = c.querySelector('.bv-top');
      if (id) id.textContent = String(d().num_blocks - 1);
      if (top && !top.querySelector('.bv-hash')) top.append(el('span', 'bv-hash'));
      if (top) top.querySelector('.bv-hash').textContent = d().widest_label || 'H88';
      const refn = c.querySelector('.bv-refn'), ref = c.querySelector('.bv-ref');
      if (refn) refn.innerHTML = '<span class="bv-was">8</span>→<b class="bv-now">8</b>';
      if (ref && !ref.querySelector('.bv-held')) ref.append(el('span', 'bv-held'));
      if (ref) ref.querySelector('.bv-held').textContent = 'A B';
      grid.append(c);
      need = Math.max(need, c.getBoundingClientRect().width + 2);
      c.remove();
    }
    const gap = 0.5 * fs, side = grid.querySelector('.bv-null') ? 3.4 * fs + gap : 0;
    const most = Math.max(1, Math.floor((w - side + gap) / (need + gap)));
    const rows = Math.ceil(n / most);
    let cols = Math.ceil(n / rows);
    for (let c = cols; c <= most && rows > 1 && n % cols === 1; c++) if (Math.ceil(n / c) === rows && n % c !== 1) cols = c;
    // (on the panel's box, which a step's HTML never replaces: the grid's own style is the step's)
    part.blocks.style.setProperty('--bvb-cols', String(Math.max(1, cols)));
    part.blocks.style.setProperty('--bvb-rows', String(Math.max(1, rows)));
    // still one card over (10 in rows of 3): the last row takes the card before it (3 3 2 2)
    part.blocks.toggleAttribute('data-bv-brk', rows > 1 && cols >= 3 && n % cols === 1);
    part.blocks.style.setProperty('--bvb-c1', grid.querySelector('.bv-null') ? '2' : '1');
  }

  // -- the ops panel: every line it shows is whole. When the lines overflow the panel, runs of
  // one call fold into one line ("6 × execute_model"), then the lines page (↓ ↑, and it says so).
  // The lines are measured once, every one shown (a folded run's line too): a line's height does
  // not depend on which others are shown, so where each line would end with some runs folded is
  // arithmetic, with no layout per fold (each would lay out the whole board). Returns the writes that show the result, for after
  // the caller's own reads (fadeFoot), or null.
  function opsLayout(codeHtml, ui) {
    const list = part.ops.querySelector('.bv-oplist');
    const cur = st.frame;
    const key = `${st.lang}|${st.step}|${cur}|${st.scale}|${st.page}|${[...st.unfold].join()}|${codeHtml ? codeHtml.length : 0}`;
    // (the panel's height is read only when nothing else changed: a read here would lay out the
    // step's writes, and the measure below lays them out once more with its own)
    if (key === st.opsKey && part.ops.clientHeight === st.opsH) return null;
    st.opsKey = key;
    st.opsH = -1;
    setText(part.page, '');
    if (!list) { if (code.isConnected) code.remove(); return null; }
    const lines = [...list.children].filter((e) => e.matches('[data-bv="op"]'));
    for (const e of lines) { e.classList.remove('bv-cur', 'bv-off'); }
    const curLine = cur === null ? null : lines.find((e) => !e.matches('.bv-opg') && Number(e.getAttribute('data-bv-index')) === cur);
    if (curLine) {
      curLine.classList.add('bv-cur');
      if (code.__bv !== codeHtml) { code.__bv = codeHtml; code.innerHTML = codeHtml || ''; }
      if (codeHtml) curLine.after(code); else if (code.isConnected) code.remove();
    } else if (code.isConnected) code.remove();
    const curRun = curLine ? curLine.getAttribute('data-bv-member') : null;
    // every line first (a run's folded line hidden); then fold runs (the longest first) while they
    // overflow
    const runs = new Map(), run = [], member = [];
    for (const e of lines) {
      const g = e.getAttribute('data-bv-run'), m = e.getAttribute('data-bv-member');
      run.push(g); member.push(m);
      if (g !== null) runs.set(g, 0);
    }
    for (const m of member) if (m !== null) runs.set(m, runs.get(m) + 1);
    const vis = run.map((g) => g === null);
    const show = () => lines.forEach((e, i) => { if (e.hidden === vis[i]) e.hidden = !vis[i]; });
    if (!root.classList.contains('bvb-fit')) { show(); st.opsH = part.ops.clientHeight; st.pages = 1; return null; }
    // (a page that scrolls shows every line)
    // A line is measured once per scale and width: its height is its content's, so a line seen
    // before — at this step or another (most of a step's lines recur in the next: the same
    // requests decoding) — is not laid out for the measure; only the lines not yet measured are
    // shown for it, the rest stay hidden. (Laying out every line, 134 at 4,096 blocks, to hide
    // most of them again was most of a step's layout.) Step into measures every line: the code
    // sits under one.
    const into = code.isConnected;
    const sized = `${st.scale}|${st.boxW}|${st.lang}|${presenting()}`;
    if (st.hOf !== sized || st.heights.size > 20000) { st.hOf = sized; st.heights = new Map(); }
    const hkey = lines.map((e) => (e.classList.contains('bv-opg') ? 'g' : 'l') + e.innerHTML);
    const height = hkey.map((k) => (into ? undefined : st.heights.get(k)));
    lines.forEach((e, i) => { const hide = height[i] !== undefined; if (e.hidden !== hide) e.hidden = hide; });
    const box = part.ops.getBoundingClientRect();
    st.opsH = part.ops.clientHeight;
    const start = list.getBoundingClientRect().top;       // (the list's top: its first line's)
    lines.forEach((e, i) => {
      if (height[i] === undefined) st.heights.set(hkey[i], (height[i] = e.getBoundingClientRect().height));
    });
    const c = into ? code.getBoundingClientRect() : null;
    const ci = lines.indexOf(curLine);
    // the code under the step-into line: its margin above, its height, its margin below
    const next = c && ci + 1 < lines.length ? lines[ci + 1].getBoundingClientRect().top - c.bottom : 0;
    const codeAt = c ? [c.top - curLine.getBoundingClientRect().bottom, c.height, next] : null;
    // the lines shown, as drawn with only them shown: [index, top, bottom], and the code's bottom
    const place = () => {
      const out = [];
      let y = start, codeBottom = -Infinity;
      for (let i = 0; i < lines.length; i++) {
        if (!vis[i]) continue;
        out.push([i, y, y + height[i]]);
        y += height[i];
        if (i === ci && codeAt) { codeBottom = y + codeAt[0] + codeAt[1]; y = codeBottom + codeAt[2]; }
      }
      return [out, codeBottom];
    };
    // does the last line shown (or the code under the step-into line) end below the panel?
    const limit = box.top + st.opsH - 1;
    const over = () => {
      const [out, codeBottom] = place();
      return Math.max(out.length ? out[out.length - 1][2] : 0, codeBottom) > limit;
    };
    const order = [...runs.entries()].sort((a, b2) => b2[1] - a[1]).map(([g]) => g);
    let folded = 0;
    for (const g of order) {
      if (!over()) break;
      if (g === curRun || st.unfold.has(g)) continue;
      for (let i = 0; i < lines.length; i++) {
        if (member[i] === g) vis[i] = false;
        else if (run[i] === g) vis[i] = true;
      }
      folded++;
    }
    if (!over()) {
      st.pages = 1;
      return () => { show(); if (folded) setText(part.page, ui.board_ops_folded); };
    }
    // pages: as many whole lines as the panel holds, the step-into line's page first
    const [at] = place();
    const shown = at.map(([i]) => lines[i]);
    // each page starts where the first line is drawn now (the lines before it hidden)
    const room = st.opsH - 1;
    const lead = shown.length ? at[0][1] - box.top : 0;
    const pages = [];
    let first = 0, top = shown.length ? at[0][1] : 0;
    for (let i = 0; i < shown.length; i++) {
      const extra = shown[i] === curLine && codeAt ? codeAt[1] : 0;
      if (at[i][2] + extra - top + lead > room && i > first) { pages.push([first, i]); first = i; top = at[i][1]; }
    }
    pages.push([first, shown.length]);
    st.pages = pages.length;
    if (curLine) {
      const at = shown.indexOf(curLine);
      const p = pages.findIndex(([a, z]) => at >= a && at < z);
      if (p >= 0) st.page = p;
    }
    st.page = Math.max(0, Math.min(st.page, pages.length - 1));
    const [a, z] = pages[st.page];
    return () => {
      show();
      shown.forEach((e, i) => e.classList.toggle('bv-off', i < a || i >= z));
      if (code.isConnected && (!curLine || curLine.classList.contains('bv-off'))) code.remove();
      const n = Number(part.ops.querySelector('[data-n]')?.getAttribute('data-n')) || shown.length;
      const from = Number(shown[a].getAttribute('data-bv-index')) + 1;
      const lastLine = shown[z - 1];
      const end = lastLine.matches('.bv-opg') ? Number(lastLine.querySelector('.bv-opn').textContent.split('–')[1])
        : Number(lastLine.getAttribute('data-bv-index')) + 1;
      setText(part.page, ui.board_ops_page.replace('{a}', from).replace('{b}', end).replace('{n}', n));
    };
  }

  function turnPage(by) {
    if (st.pages <= 1) return false;
    const p = Math.max(0, Math.min(st.pages - 1, st.page + by));
    if (p === st.page) return true;
    st.page = p;
    if (st.frame !== null) {             // step into: the page follows the op shown
      const f = Number(part.ops.querySelector('.bv-opl:not(.bv-off):not([hidden])')?.getAttribute('data-bv-index'));
      st.opsKey = '';
      if (!Number.isNaN(f)) { show(st.step, f, 'jump'); return true; }
    }
    const ui = d().ui[st.lang] || d().ui[d().langs[0]];
    st.opsKey = '';
    const shown = opsLayout(null, ui);
    if (shown) shown();
    return true;
  }

  function drawButtons(ui) {
    const n = d().num_steps, k = st.step;
    const atStart = k === 0 && (st.frame === null || st.frame === 0);
    const atEnd = k === n - 1 && (st.frame === null || st.frame >= nFrames(k) - 1);
    const set = (act, label, dis) => {
      const e = root.querySelector(`[data-act="${act}"]`);
      if (e.title !== label) { e.title = label; e.setAttribute('aria-label', label); }
      if (e.disabled !== !!dis) e.disabled = !!dis;
    };
    set('first', ui.nav_first, atStart);
    set('prev', ui.nav_prev, atStart);
    set('next', ui.nav_next, atEnd);
    set('last', ui.nav_last, atEnd);
    set('play', st.playing ? ui.nav_pause : ui.nav_play, false);
    setHtml(part.play, st.playing ? ICONS.pause : ICONS.play);
    part.play.classList.toggle('bvb-on', st.playing);
    setText(part.into, ui.step_into);
    setText(part.whyBtn, ui.board_why);
    if (part.whyBtn.title !== ui.board_why_title) part.whyBtn.title = ui.board_why_title;
    if (part.into.disabled !== !!d().no_frames) part.into.disabled = !!d().no_frames;
    setAttr(part.into, 'aria-pressed', String(st.frame !== null));
    part.into.classList.toggle('bvb-on', st.frame !== null);
    const other = d().langs.length > 1 ? d().langs.find((l) => l !== st.lang) : null;
    if (part.lang.hidden !== !other) part.lang.hidden = !other;
    if (other) setText(part.lang, (d().ui[st.lang] || {}).board_lang || other);
    setText(part.keys, ui.board_keys);
  }

  function drawMarks() {
    const n = d().num_steps;
    const key = `${n}|${st.lang}|${d().lo}|${d().hi}`;
    if (part.marks.getAttribute('data-key') !== key) {
      part.marks.setAttribute('data-key', key);
      part.marks.innerHTML = '';
      const per = Math.max(1, Math.ceil(n / 160));
      const cols = Math.ceil(n / per);    // numbers on every mark up to 40, then every 5th or 10th
      const label = cols <= 40 ? 1 : cols <= 80 ? 5 : 10;
      const names = d().mark_names[st.lang] || d().mark_names[d().langs[0]];
      const events = d().events[st.lang] || d().events[d().langs[0]];
      for (let s = 0; s < n; s += per) {
        const e = el('button', 'bvb-mk', { type: 'button', 'data-step': String(s), role: 'listitem' });
        const codes = new Set();
        for (let j = s; j < Math.min(n, s + per); j++) for (const c of d().marks[j] || '') codes.add(c);
        const bars = el('span', 'bvb-bars');
        for (const c of codes) {
          const i = el('i'); i.style.background = d().mark_colours[c]; bars.append(i);
        }
        const num = el('span', 'bvb-num'); num.textContent = (s / per) % label ? '' : String(s);
        e.append(bars, num);
        const what = [...codes].map((c) => names[c]).join(', ');
        const ev = inWindow(s) ? events[s - d().lo] : '';
        e.title = `${s}${ev ? ' · ' + ev : ''}${what ? ' — ' + what : ''}`;
        part.marks.append(e);
      }
      part.marks.style.setProperty('--bvb-cols', String(cols));
      part.marks.setAttribute('data-per', String(per));
    }
    const per = Number(part.marks.getAttribute('data-per')) || 1;
    for (const e of part.marks.children) {
      const s = Number(e.getAttribute('data-step'));
      e.classList.toggle('bvb-cur', st.step >= s && st.step < s + per);
    }
  }

  // -- the dense view (big pools): a cell per block, an id axis, the queue as a strip -----------
  // A palette colour (the theme's --bv-<name>, set on the component's host), read once.
  function colour(name) {
    const have = st.colours || (st.colours = {});
    if (!(name in have)) have[name] = getComputedStyle(root).getPropertyValue('--bv-' + name).trim();
    return have[name];
  }
  // The cells are written as pixels and put in one call: 4,096 fillRect calls took ~10 ms a step.
  function kindPixels() {                 // kind letter -> its colour as one RGBA word, per data
    if (st.pixelsOf === d()) return st.pixels;
    const c = document.createElement('canvas');
    c.width = c.height = 1;
    const g = c.getContext('2d', { willReadFrequently: true });
    const out = new Uint32Array(128);
    for (const [kind, colour] of Object.entries(d().kind_colours)) {
      g.clearRect(0, 0, 1, 1); g.fillStyle = colour; g.fillRect(0, 0, 1, 1);
      out[kind.charCodeAt(0)] = new Uint32Array(g.getImageData(0, 0, 1, 1).data.buffer)[0];
    }
    st.pixelsOf = d(); st.pixels = out;
    return out;
  }

  function cellPixels(g, cv, cells, cols, x0, y0, pitch, side, margin) {   // (device pixels)
    const Wp = cv.width, Hp = cv.height;
    if (!st.img || st.img.width !== Wp || st.img.height !== Hp) st.img = g.createImageData(Wp, Hp);
    const px = new Uint32Array(st.img.data.buffer);
    px.fill(0xffffffff);
    const rgba = kindPixels(), s = Math.max(1, Math.round(side));
    for (let i = 0; i < cells.length; i++) {
      const x = Math.round(x0 + (i % cols) * pitch), y = Math.round(y0 + Math.floor(i / cols) * pitch);
      const colour = rgba[cells.charCodeAt(i)];
      for (let r = y, end = Math.min(Hp, y + s); r < end; r++) px.fill(colour, r * Wp + x, r * Wp + x + s);
    }
    // the cells and the margin the last step's marks reached (a 2 px line around a cell); the
    // axis labels outside it stay
    const mx = Math.max(0, Math.floor(x0 - margin)), my = Math.max(0, Math.floor(y0 - margin));
    g.putImageData(st.img, 0, 0, mx, my, Wp - mx, Hp - my);
  }

  function dense(k) {
    const rec = d().cells[k - d().lo];
    let box = part.blocks.querySelector('.bvb-dense');
    if (!box) {
      part.blocks.innerHTML = `<div class="bvb-dense"><div class="bvb-zoom">
        <button type="button" data-zoom="-1">−</button><button type="button" data-zoom="1">+</button>
        <span class="bvb-dnote"></span></div><div class="bvb-scroll"><canvas class="bvb-cv"></canvas></div>
        <canvas class="bvb-strip"></canvas></div>`;
      box = part.blocks.querySelector('.bvb-dense');
    }
    const ui = d().ui[st.lang] || d().ui[d().langs[0]];
    setText(box.querySelector('.bvb-dnote'), ui.board_dense_note.replace('{n}', d().num_blocks.toLocaleString()));
    const n = rec.cells.length;
    const scroll = box.querySelector('.bvb-scroll');
    // the panel's width, read once per scale (a read here would lay out the half-drawn board)
    if (!st.denseWidth) st.denseWidth = Math.max(200, scroll.clientWidth || part.blocks.clientWidth || 600);
    const width = st.denseWidth;
    const axis = 34;
    // the fewest columns (so the biggest cells, up to 28 px) that keep the grid within 200 px
    const sized = (c) => Math.min(28, Math.max(3, Math.floor((width - axis) / c)));
    const cols = [16, 32, 64].find((c) => Math.ceil(n / c) * sized(c) <= 200) || 128;
    const rows = Math.ceil(n / cols);
    const cell = sized(cols) * (st.zoom || 1);
    const cv = box.querySelector('.bvb-cv');
    setAttr(cv, 'data-cols', String(cols));
    const dpr = window.devicePixelRatio || 1;
    const W = axis + cols * cell, H = 14 + rows * cell;
    if (cv.width !== W * dpr || cv.height !== H * dpr) {
      cv.width = W * dpr; cv.height = H * dpr; cv.style.width = W + 'px'; cv.style.height = H + 'px';
    }
    const g = cv.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    const axisKey = `${W}x${H}@${dpr}:${cols}`;
    if (cv.__bvAxis !== axisKey) {           // the id axis, drawn once per size: setting a
      cv.__bvAxis = axisKey;                 // canvas font styles the document (~5 ms a step)
      g.fillStyle = colour('paper'); g.fillRect(0, 0, W, H);
      g.fillStyle = colour('muted'); g.font = '10px sans-serif';
      for (let c = 0; c < cols; c += Math.min(16, cols / 4)) g.fillText(String(c), axis + c * cell, 10);
      const every = Math.max(1, Math.round(12 / cell));
      for (let r = 0; r < rows; r += every) g.fillText(String(r * cols), 0, 14 + r * cell + Math.min(cell, 10));
    }
    cellPixels(g, cv, rec.cells, cols, axis * dpr, 14 * dpr, cell * dpr, Math.max(1, cell - 1) * dpr, 2 * dpr);
    const mark = (ids, style, dash) => {     // one path per style: a step can change hundreds
      g.beginPath();
      for (const i of ids) {
        if (i === null || i === undefined || i >= n) continue;
        g.rect(axis + (i % cols) * cell - 1, 14 + Math.floor(i / cols) * cell - 1, cell + 1, cell + 1);
      }
      g.strokeStyle = style; g.lineWidth = 2; g.setLineDash(dash || []);
      g.stroke();
    };
    mark(rec.changed, colour('amber'));
    mark([rec.evict], colour('red'), [2, 2]);
    mark([rec.victim], colour('red'));
    if (st.lit) mark(Array.from(st.lit, Number), colour('ink'));
    cv.onmousemove = (ev) => {
      const rc = cv.getBoundingClientRect();
      const c = Math.floor((ev.clientX - rc.left - axis) / cell), r = Math.floor((ev.clientY - rc.top - 14) / cell);
      const i = r * cols + c;
      const g = rec.groups && d().group_names ? rec.groups[i] : '.';   // a hybrid model: its group
      const named = g && g !== '.' ? ` · ${(d().group_names[st.lang] || [])[Number(g)] || ''}` : '';
      part.tip.textContent = c >= 0 && c < cols && i >= 0 && i < n ? `${ui.block} ${i}${named}` : '';
    };
    // the free queue as a strip, head on the left
    const strip = box.querySelector('.bvb-strip');
    const sw = width, sh = 14;
    if (strip.width !== sw * dpr) {
      strip.width = sw * dpr; strip.height = sh * dpr; strip.style.width = sw + 'px'; strip.style.height = sh + 'px';
    }
    const h = strip.getContext('2d');
    const Wq = strip.width, Hq = strip.height, m = rec.qcells.length, rgba = kindPixels();
    if (!st.stripImg || st.stripImg.width !== Wq || st.stripImg.height !== Hq) st.stripImg = h.createImageData(Wq, Hq);
    const qp = new Uint32Array(st.stripImg.data.buffer);
    for (let x = 0; x < Wq; x++) qp[x] = m ? rgba[rec.qcells.charCodeAt(Math.floor((x * m) / Wq))] : 0xffffffff;
    for (let r = 1; r < Hq; r++) qp.copyWithin(r * Wq, 0, Wq);
    h.putImageData(st.stripImg, 0, 0);
  }

  // -- linking: hover a block, a request or a hash row; every panel lights the same blocks ----
  function idsAt(target) {
    const t = target && target.closest ? target : null;
    if (!t) return null;
    const seg = t.closest('[data-split-block]');   // a prompt split's segment: its blocks
    if (seg) return seg.getAttribute('data-split-block').split(' ');
    const gt = t.closest('[data-bv-group-table]');   // a hybrid model's group row: an entry is its
    if (gt) {                                        // block, the group's badge the row's blocks
      const at = t.closest('[data-block]');
      return at ? [at.getAttribute('data-block')] : [...gt.querySelectorAll('[data-block]')].map((e) => e.getAttribute('data-block'));
    }
    const row = t.closest('[data-request], tr[data-hash], .bv-opl');
    const one = t.closest('[data-block]');
    if (one && !(row && row.contains(one) && one === row)) {
      if (row && !one.closest('.bvb-queue, .bvb-blocks')) {
        return [...row.querySelectorAll('[data-block]')].map((e) => e.getAttribute('data-block'));
      }
      return [one.getAttribute('data-block')];
    }
    if (row) return [...row.querySelectorAll('[data-block]')].map((e) => e.getAttribute('data-block'));
    return null;
  }

  function light(ids) {
    st.lit = ids;
    const want = new Set(ids || []);
    for (const e of root.querySelectorAll('.bv-lit')) e.classList.remove('bv-lit');
    root.classList.toggle('bvb-linking', want.size > 0);
    if (!want.size) return;
    for (const e of root.querySelectorAll('[data-block]')) {
      if (want.has(e.getAttribute('data-block'))) e.classList.add('bv-lit');
    }
    for (const e of root.querySelectorAll('[data-request], tr[data-hash], .bv-opl')) {
      const mine = [...e.querySelectorAll('[data-block]')].some((x) => want.has(x.getAttribute('data-block')));
      if (mine) e.classList.add('bv-lit');
    }
  }

  root.addEventListener('pointerover', (ev) => {
    const ids = idsAt(ev.target);
    const key = ids ? ids.join(',') : '';
    if (key !== (st.lit || []).join(',')) light(ids);
  });
  root.addEventListener('pointerleave', () => light(null));

  // -- moving ---------------------------------------------------------------------------------
  function flush() {
    clearTimeout(st.debounce);
    const pos = { step: st.step, frame: st.frame, lang: st.lang };
    const key = JSON.stringify(pos);
    if (key !== st.sent && b.api && b.api.setStateValue) {
      st.sent = key;
      b.api.setStateValue('pos', pos);
    }
  }
  function report() {
    if (!st.control.report) return;             // nothing on the server follows the step: no rerun
    clearTimeout(st.debounce);
    st.debounce = setTimeout(flush, DEBOUNCE_MS);
  }

  // the step in the address: ?step=&op= in the app, #step= in an exported file
  function readUrl() {
    try {
      if (d().url === 'hash') {
        const m = /step=(\d{1,9})/.exec(window.location.hash);
        return m ? { step: Number(m[1]), frame: null } : null;
      }
      const u = new URL(window.location.href);
      const s = u.searchParams.get('step');
      if (s === null || !/^\d{1,9}$/.test(s)) return null;
      const op = u.searchParams.get('op');
      return { step: Number(s), frame: op !== null && /^\d{1,9}$/.test(op) ? Math.max(0, Number(op) - 1) : null };
    } catch (e) { return null; }
  }

  function writeUrl(push, k = st.step, frame = st.frame) {
    if (!d().url) return;
    try {
      const state = { bvStep: k, bvFrame: frame };
      if (d().url === 'hash') {           // keep any flags (#step=3&still&present)
        const h = window.location.hash;
        const want = /step=\d+/.test(h) ? h.replace(/step=\d+/, `step=${k}`) : `#step=${k}`;
        if (h === want) return;
        if (push) window.history.pushState(state, '', want);
        else window.history.replaceState(state, '', want);
        return;
      }
      const u = new URL(window.location.href);
      const want = String(k), op = frame === null ? null : String(frame + 1);
      if (u.searchParams.get('step') === want && u.searchParams.get('op') === op) return;
      u.searchParams.set('step', want);
      if (op === null) u.searchParams.delete('op'); else u.searchParams.set('op', op);
      if (push) window.history.pushState(state, '', u.toString());
      else window.history.replaceState(state, '', u.toString());
    } catch (e) { /* a sandboxed page may refuse; stepping still works */ }
  }

  // A step's URL is written after its frame is painted: a history entry makes Chrome redraw the
  // page's SVG icon and costs ~4 ms that the key would otherwise wait for.
  function writeUrlAfterPaint(push) {
    const k = st.step, frame = st.frame;
    if (document.hidden) { writeUrl(push, k, frame); return; }
    requestAnimationFrame(() => setTimeout(() => writeUrl(push, k, frame), 0));
  }

  function show(k, frame, how) {
    const n = d().num_steps;
    k = Math.max(0, Math.min(n - 1, k | 0));
    if (frame !== null && frame !== undefined) frame = Math.max(0, frame | 0);
    else frame = null;
    const moved = k !== st.step || frame !== st.frame;
    if (k !== st.step) { st.page = 0; st.unfold.clear(); }
    st.step = k; st.frame = frame;
    if (!inWindow(k)) askWindow(k);
    draw(moved && how !== 'jump');
    if (moved && how !== 'pop') writeUrlAfterPaint(how !== 'init');
    if (how !== 'init') report();
  }

  function askWindow(k) {
    if (st.want === k || !b.api || !b.api.setStateValue) return;
    st.want = k;
    b.api.setStateValue('want', k);
  }

  function move(act) {
    const n = d().num_steps, k = st.step, f = st.frame;
    if (f === null) {
      if (act === 'next') show(k + 1, null);
      else if (act === 'prev') show(k - 1, null);
    } else {
      const m = nFrames(k);
      if (act === 'next') {
        if (f + 1 < m) show(k, f + 1);
        else if (k + 1 < n) show(k + 1, 0);
      } else if (act === 'prev') {
        if (f > 0) show(k, f - 1);
        else if (k > 0) show(k - 1, Math.max(0, nFrames(k - 1) - 1));
      }
    }
    if (act === 'first') show(0, f === null ? null : 0, 'jump');
    if (act === 'last') show(n - 1, f === null ? null : Math.max(0, nFrames(n - 1) - 1), 'jump');
  }

  function atEnd() {
    const k = st.step;
    return k >= d().num_steps - 1 && (st.frame === null || st.frame >= nFrames(k) - 1);
  }

  function play(on) {
    st.playing = on && !atEnd();
    clearInterval(st.timer);
    if (st.playing) {
      const ms = Math.max(120, (2000 / (d().speed || 1)));
      st.timer = setInterval(() => {
        if (atEnd()) { play(false); return; }
        move('next');
      }, ms);
    }
    draw(false);
  }

  function toggleInto() {
    if (d().no_frames) return;
    show(st.step, st.frame === null ? 0 : null, 'jump');
    if (st.frame !== null && !hasFrames()) flush();   // the server ships the frames on request
  }

  function act(a) {
    if (a === 'play') play(!st.playing);
    else if (a === 'into') toggleInto();
    else if (a === 'why') { st.why = !st.why; draw(false); }
    else if (a === 'lang') {
      // the scale was fitted in both languages: only a redraw here; the page hears of it after
      const other = d().langs.find((l) => l !== st.lang);
      if (other) {
        st.lang = other; st.opsKey = ''; draw(false);
        requestAnimationFrame(() => setTimeout(flush, 0));
      }
    } else { if (st.playing && a !== 'next') play(false); move(a); }
  }

  root.addEventListener('click', (ev) => {
    const btn = ev.target.closest('[data-act]');
    if (btn && root.contains(btn)) { act(btn.getAttribute('data-act')); return; }
    const mk = ev.target.closest('.bvb-mk');
    if (mk) { show(Number(mk.getAttribute('data-step')), st.frame === null ? null : 0, 'jump'); return; }
    const g = ev.target.closest('.bv-opg');
    if (g && root.contains(g)) { st.unfold.add(g.getAttribute('data-bv-run')); st.opsKey = ''; draw(false); return; }
    const z = ev.target.closest('[data-zoom]');
    if (z) { st.zoom = Math.max(1, Math.min(4, (st.zoom || 1) + Number(z.getAttribute('data-zoom')))); st.denseWidth = 0; draw(false); return; }
    // a tap links too (no hover on a touch screen)
    if (ev.pointerType === 'touch' || ev.pointerType === 'pen') light(idsAt(ev.target));
  });

  function onKey(ev) {
    if (!d() || !root.isConnected || ev.defaultPrevented) return;
    if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
    const path = ev.composedPath ? ev.composedPath() : [ev.target];
    for (const n of path) {
      if (n && n.matches && n.matches(TYPING)) return;
      if (n && n.isContentEditable) return;
    }
    if (ev.key === 'ArrowDown' || ev.key === 'ArrowUp') {     // the ops' pages, when they have any
      if (turnPage(ev.key === 'ArrowDown' ? 1 : -1)) { ev.preventDefault(); ev.stopPropagation(); }
      return;
    }
    if (ev.key === 'Escape' && st.why) { ev.preventDefault(); act('why'); return; }
    const map = { ArrowRight: 'next', ArrowLeft: 'prev', Home: 'first', End: 'last', ' ': 'play',
                  PageDown: 'next', PageUp: 'prev', '?': 'why', w: 'why', W: 'why' };
    const a = map[ev.key];
    if (!a) return;
    ev.preventDefault();
    ev.stopPropagation();
    act(a);
  }
  document.addEventListener('keydown', onKey, true);

  // A click or a press on the page outside the board (a Streamlit button: try it yourself, an
  // export) starts a rerun about "this step": the board tells Python its step first. Stepping
  // alone tells Python nothing while no panel follows the step (report off), so without this the
  // click would act on the step Python last heard of.
  function onOutside(ev) {
    if (!d() || !root.isConnected || (ev.type === 'keydown' && ev.key !== 'Enter' && ev.key !== ' ')) return;
    const path = ev.composedPath ? ev.composedPath() : [ev.target];
    if (path.includes(root)) return;
    if (ev.type === 'keydown' && !path.some((n) => n && n.matches && n.matches('button, [role="button"]'))) return;
    flush();
  }
  document.addEventListener('pointerdown', onOutside, true);
  document.addEventListener('keydown', onOutside, true);

  function onPop() {
    if (!d() || !d().url) return;
    const at = readUrl();
    if (at && (at.step !== st.step || at.frame !== st.frame)) show(at.step, at.frame, 'pop');
  }
  window.addEventListener('popstate', onPop);
  window.addEventListener('hashchange', onPop);

  // -- sizing for the room -----------------------------------------------------------------------
  // The board fills the viewport below its top (a narrow screen: it flows in one column and the
  // page scrolls, at its own size). One scale for the whole lesson: the largest at which what
  // cannot page — the caption, the cards, the free queue — fits at every step in every language
  // shipped; what grows with the step (the ops, the hash table, the requests) pages or scrolls
  // inside its panel at that scale, so the tallest step does not shrink the others, and the
  // language toggle needs no new fit.
  const NARROW = 700;                 // px of board: below, one column that scrolls
  function avail() {
    const top = Math.max(0, Math.min(root.getBoundingClientRect().top + scrollTop(), 400));
    return window.innerHeight - top - 6;
  }
  function scrollTop() {
    let e = root.parentNode;
    while (e) {
      if (e.host) e = e.host;
      if (e.scrollTop) return e.scrollTop;
      e = e.parentNode;
    }
    return window.scrollY || 0;
  }
  function setScale(s) {
    st.scale = s;
    st.denseWidth = 0;
    root.style.setProperty('--bv-scale', String(s));
  }
  // the scales a mode may take (at 1.25 the caption is 28 px and a block id 40 px; a lesson of up
  // to 16 blocks fits at 1280×800 above it, tests/e2e/test_board_fits.py); normal mode keeps its
  // caption at 20 px or more
  function bounds() {
    const w = window.innerWidth;
    if (presenting()) return [0.9, Math.max(1.6, Math.min(2.6, w / 740))];
    return [0.9, Math.max(1.1, Math.min(1.6, w / 1150))];
  }
  function fit() {
    if (!d() || !d().num_steps || !root.isConnected) return;
    const keep = { step: st.step, frame: st.frame, lang: st.lang };
    let layouts = 0;
    const flow = st.control.fit === false || root.clientWidth < NARROW;
    root.classList.toggle('bvb-fit', !flow);
    root.style.height = '';
    st.boxW = root.clientWidth;
    if (flow) {                            // a preview beside an editor, a phone: it scrolls
      setScale(st.control.fit === false ? 0.9 : 1);
    } else {
      const [lo, hi] = bounds();
      const langs = d().langs.filter((l) => d().steps[l]);
      const count = d().hi - d().lo + 1, every = Math.max(1, Math.ceil(count / 60));
      const probe = [];
      for (let i = d().lo; i <= d().hi; i += every) for (const l of langs) probe.push([i, l]);
      root.classList.add('bvb-fitting');
      const room = avail();
      // at scale s, the probes drawn: how far the worst overflows (px), how much bigger than the
      // room it is (a ratio), and each probe's overflow
      const over = (s, only) => {
        setScale(s);
        let most = -Infinity, need = 0;
        const each = [];
        for (const p of only || probe) {
          layouts++;
          st.step = p[0]; st.lang = p[1]; st.frame = null; draw(false, true);
          const h = root.scrollHeight, w = root.scrollWidth, cw = root.clientWidth + 2;
          const o = Math.max(h - room, w - cw);
          most = Math.max(most, o);
          need = Math.max(need, h / room, w / cw);
          each.push([o, p]);
        }
        return [most, need, each];
      };
      const worstOf = (each) => each.sort((a, b) => b[0] - a[0]).slice(0, 3).map((x) => x[1]);
      // A scale change restyles every line of the board (~30 ms on a loaded 2-core machine): few
      // are tried. From the top scale's overflow, a first guess where the worst step would just
      // fit if the board's size went with the scale (it grows as fast or faster: a row of cards
      // more); then bisect to 1% on the three worst steps, and check every step there.
      let [most, need, each] = over(hi);
      let good = hi;
      if (most > 0) {
        let bad = hi, worst = worstOf(each), s = Math.max(lo, (hi / need) * 0.99);
        good = lo;
        for (let round = 0; round < 3; round++) {
          while (bad - good > 0.01 * bad) {
            if (over(s, worst)[0] > 0) bad = s; else good = s;
            s = (good + bad) / 2;
          }
          [most, need, each] = over(good);           // every step there
          if (most <= 0) break;
          bad = good; good = lo; worst = worstOf(each); s = Math.max(lo, (bad / need) * 0.99);
        }
        if (most > 0) good = lo;
      }
      setScale(good);
      root.classList.remove('bvb-fitting');
      root.style.height = `${room}px`;
    }
    st.step = keep.step; st.frame = keep.frame; st.lang = keep.lang;
    st.opsKey = '';
    draw(false);
    st.fits += 1;
    setAttr(root, 'data-bv-fits', String(st.fits));     // for tests: how many fits so far
    setAttr(root, 'data-bv-scale', st.scale.toFixed(3));
    setAttr(root, 'data-bv-layouts', String(layouts));  // (for tests: the steps laid out to fit)
  }
  let resizeT = 0;
  const onResize = () => { clearTimeout(resizeT); resizeT = setTimeout(() => { st.fitKey = ''; fit(); }, 150); };
  window.addEventListener('resize', onResize);
  // the board's own box: refit when its width changes (the sidebar opened or closed), not its
  // height, which changes with every step's content (a refit there would stall the next key)
  let seenWidth = -1;
  const ro = window.ResizeObserver ? new ResizeObserver(() => {
    const w = root.clientWidth;
    if (w !== seenWidth) { const first = seenWidth < 0; seenWidth = w; if (!first) onResize(); }
  }) : null;

  // -- data in ----------------------------------------------------------------------------------
  b.load = (data, control) => {
    if (!data || !data.num_steps) { st.data = null; return; }
    const first = st.data === null;
    if (first) performance.mark('bv-data');     // (bench/board.py times the first board from here)
    const reportOn = !!control.report && (first || !st.control.report);
    const windowChanged = !first && (data.lo !== st.data.lo || data.hi !== st.data.hi);
    st.data = data;
    st.control = control;
    st.want = -1;
    if (data.lang && data.lang !== st.dataLang) {
      st.dataLang = data.lang;
      if (data.langs.includes(data.lang)) st.lang = data.lang;
    }
    if (!data.langs.includes(st.lang)) st.lang = data.langs[0];
    const g = control.goto;
    const seq = g ? `${g.run || ''}#${g.seq}` : null;
    if (g && seq !== st.seq) {
      st.seq = seq;
      st.step = Math.max(0, Math.min(data.num_steps - 1, g.step | 0));
      st.frame = g.frame === null || g.frame === undefined ? null : g.frame;
      if (first && data.url) onPopInit();
      else if (!first) writeUrl(true);
    }
    if (first) { writeUrl(false); if (ro) ro.observe(root); }
    // the requests sit under the cards when a few rows of cards leave room there, else under
    // the ops and the hash table (a pool of more than 8 blocks)
    const home = !data.dense && data.num_blocks > 9 ? part.right : part.left;
    if (part.reqsBox.parentNode !== home) home.append(part.reqsBox);
    root.classList.toggle('bvb-reqs-right', home === part.right);
    if (st.playing) play(true);             // a new speed takes effect at once
    const key = `${data.num_steps}|${data.lo}|${data.hi}|${data.presenter}|${data.langs.join()}|${data.num_blocks}`;
    draw(false);
    if (key !== st.fitKey || windowChanged) { st.fitKey = key; fit(); }
    if (first) {
      root.setAttribute('data-bv-ready', '1');
      requestAnimationFrame(() => setTimeout(() => performance.mark('bv-painted'), 0));
    }
    if (reportOn) { st.sent = ''; flush(); }   // a panel below now follows the step: tell it where
  };
  function onPopInit() {
    // a reload keeps the step the address names (the browser owns it once the board is up)
    const at = readUrl();
    if (at) { st.step = Math.min(d().num_steps - 1, at.step); if (d().url === true) st.frame = at.frame; }
  }
  b.destroy = () => {
    clearInterval(st.timer); clearTimeout(st.debounce); clearTimeout(resizeT);
    document.removeEventListener('keydown', onKey, true);
    document.removeEventListener('pointerdown', onOutside, true);
    document.removeEventListener('keydown', onOutside, true);
    window.removeEventListener('popstate', onPop);
    window.removeEventListener('hashchange', onPop);
    window.removeEventListener('resize', onResize);
    if (ro) ro.disconnect();
    root.remove();
  };
  b.state = st;
  return b;
}
