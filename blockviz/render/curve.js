// The capacity page's curve (its data: blockviz.render.curve.curve_data). A trace's prefix-cache
// hit rate at EVERY KV-cache capacity from its largest request to its working set, per free order:
// the one pass's breakpoints (blockviz.sim.curve.SequenceCurve.breakpoints), evaluated here as
// Python evaluates them (blockviz.sim.curve.hit_blocks_at), so the step function drawn and read is
// exact at every pool size. Beside it: the best any eviction policy could do (Belady's MIN, at a
// few sizes), the infinite cache's ceiling and each order's knee. A capacity marker follows the
// pointer while it is pressed (or the arrow keys) and the readout above the chart follows at once;
// once let go, Python learns the pool size (setStateValue('pool')) for the player's window and the
// per-chat view. Colours are the palette's CSS custom properties (blockviz.render.theme).

const NS = 'http://www.w3.org/2000/svg';
const CHARTS = new WeakMap();   // the component's parent element -> its chart
const SEND_MS = 350;            // keys: Python hears the pool once they pause
const M = { l: 64, r: 18, t: 14, b: 40 };   // the plot's margins (px); b grows with the GiB line
let lastText = null, lastData = null;

export default function curve(component) {
  const { parentElement } = component;
  let data = component.data;
  if (typeof data === 'string') {        // the app sends one cached JSON text
    if (data !== lastText) { lastText = data; lastData = JSON.parse(data); }
    data = lastData;
  }
  let c = CHARTS.get(parentElement);
  if (!c) {
    c = create(parentElement);
    CHARTS.set(parentElement, c);
  }
  c.api = component;
  c.load(data || {});
  return () => { c.destroy(); CHARTS.delete(parentElement); };
}

// -- the curve, as Python has it ------------------------------------------------------------
function decode(o) {                      // deltas back to (xs, vals, slopes)
  const xs = new Array(o.dx.length), vs = new Array(o.dx.length);
  let x = 0, v = 0;
  for (let i = 0; i < o.dx.length; i++) { x += o.dx[i]; v += o.dv[i]; xs[i] = x; vs[i] = v; }
  return { id: o.id, name: o.name, knee: o.knee, xs, vs, ss: o.s };
}

function piece(c, n) {                    // the last i with xs[i] <= n (-1: before the first)
  let lo = 0, hi = c.xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (c.xs[mid] <= n) lo = mid + 1; else hi = mid;
  }
  return lo - 1;
}

const at = (c, i, n) => (i < 0 ? 0 : c.vs[i] + c.ss[i] * (n - c.xs[i]));
const hitBlocks = (c, n) => at(c, piece(c, n), n);   // blockviz.sim.curve.hit_blocks_at

function span(c, a, b) {                  // first, last, min and max of the hits over a..b
  let i = piece(c, a);
  const first = at(c, i, a);
  let mn = first, mx = first;
  for (;;) {
    const end = i + 1 < c.xs.length ? Math.min(b, c.xs[i + 1] - 1) : b;
    const v1 = at(c, i, Math.max(a, i < 0 ? a : c.xs[i])), v2 = at(c, i, end);
    mn = Math.min(mn, v1, v2); mx = Math.max(mx, v1, v2);
    if (end >= b) return { first, last: v2, min: mn, max: mx };
    i++;
  }
}

// -- drawing --------------------------------------------------------------------------------
function el(tag, cls, attrs) {
  const e = document.createElementNS(NS, tag);
  if (cls) e.setAttribute('class', cls);
  if (attrs) for (const k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}

function h(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

const fill = (s, f) => s.replace(/\{(\w+)\}/g, (m, k) => (k in f ? f[k] : m));
const pct = (r) => `${(100 * r).toFixed(1)}%`;
const gib = (tokens, bpt) => `${Number((tokens * bpt / 2 ** 30).toPrecision(3))} GiB`;
const STAR = (x, y, r) => {
  let d = '';
  for (let k = 0; k < 10; k++) {
    const a = -Math.PI / 2 + k * Math.PI / 5, q = k % 2 ? r * 0.45 : r;
    d += `${k ? 'L' : 'M'}${(x + q * Math.cos(a)).toFixed(1)},${(y + q * Math.sin(a)).toFixed(1)}`;
  }
  return d + 'Z';
};

function niceStep(top, most) {
  for (const s of [0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5]) if (top / s <= most) return s;
  return 1;
}

function create(parent) {
  const root = h('div', 'bvc');
  root.dataset.bv = 'curve';
  const read = h('div', 'bvc-read');
  read.setAttribute('aria-live', 'polite');
  const legend = h('div', 'bvc-legend');
  const svg = el('svg', 'bvc-plot', { role: 'slider', tabindex: '0' });
  const hint = h('div', 'bvc-hint');
  root.append(read, legend, svg, hint);
  parent.appendChild(root);
  const c = { api: null, data: null, pool: null, seq: null, sent: null, timer: null, drag: false };
  let geo = null;          // the last drawing's scales and layers
  let width = 0;

  function load(d) {
    const fresh = d !== c.data;
    c.data = d;
    if (fresh) {
      c.orders = (d.orders || []).map(decode);
      c.best = d.optimal || [];
      root.lang = d.lang === 'zh' ? 'zh-CN' : 'en';
      c.fmt = new Intl.NumberFormat(root.lang, { notation: 'compact', maximumSignificantDigits: 3 });
      c.full = new Intl.NumberFormat('en-US');
    }
    if (c.seq !== d.seq || c.pool === null) {   // Python moved the marker (or a first drawing)
      c.seq = d.seq;
      c.pool = clamp(d.pool);
      c.sent = c.pool;
    }
    if (fresh) { drawLegend(); draw(); }
    mark();
  }

  const clamp = (n) => Math.max(c.data.lo, Math.min(c.data.hi, Math.round(Number(n) || c.data.lo)));
  const rate = (blocks) => (c.data.queries ? blocks * c.data.bs / c.data.queries : 0);

  function drawLegend() {
    const L = c.data.labels;
    legend.textContent = '';
    const item = (cls, text, shape) => {
      const s = h('span', 'bvc-li');
      const k = el('svg', `bvc-key ${cls}`, { width: '34', height: '14', 'aria-hidden': 'true' });
      if (shape === 'star') k.appendChild(el('path', 'bvc-knee', { d: STAR(17, 7, 7) }));
      else if (shape === 'box') k.appendChild(el('rect', 'bvc-gap', { x: '2', y: '2', width: '30', height: '10' }));
      else {
        k.appendChild(el('line', 'bvc-k', { x1: '2', y1: '7', x2: '32', y2: '7' }));
        if (shape === 'dot') k.appendChild(el('circle', 'bvc-k-dot', { cx: '17', cy: '7', r: '4' }));
      }
      s.append(k, document.createTextNode(text));
      legend.appendChild(s);
    };
    for (const o of c.orders) item(`bvc-o-${o.id}`, o.name);
    if (c.best.length) {
      item('bvc-o-best', fill(L.best_n, { n: c.best.length }), 'dot');
      item('', L.policy_gap, 'box');
    }
    item('bvc-o-ceiling', L.ceiling);
    item('', L.knee, 'star');
  }

  function draw() {
    const d = c.data;
    width = Math.max(320, Math.floor(root.clientWidth || parent.clientWidth || 800));
    const height = d.height || 420;
    const bottom = M.b + (d.bpt ? 18 : 0);
    const W = width - M.l - M.r, H = height - M.t - bottom;
    svg.setAttribute('width', String(width));
    svg.setAttribute('height', String(height));
    svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
    svg.setAttribute('aria-valuemin', String(d.lo));
    svg.setAttribute('aria-valuemax', String(d.hi));
    svg.setAttribute('aria-label', d.labels.x);
    svg.textContent = '';
    const loT = Math.log(d.lo * d.bs), span_ = Math.max(1e-9, Math.log(Math.max(d.hi, d.lo + 1) * d.bs) - loT);
    const X = (n) => M.l + (Math.log(n * d.bs) - loT) / span_ * W;
    const N = (px) => Math.exp(loT + (px - M.l) / W * span_) / d.bs;
    const top = Math.min(1, Math.max(0.05, d.ceiling * 1.15));
    const Y = (r) => M.t + H - r / top * H;
    geo = { X, N, Y, W, H, top };
    const grid = el('g', 'bvc-grid'), axes = el('g', 'bvc-axes');
    // y: hit rate
    const step = niceStep(top, 8);
    for (let r = 0; r <= top + 1e-9; r += step) {
      grid.appendChild(el('line', '', { x1: M.l, x2: M.l + W, y1: Y(r), y2: Y(r) }));
      const tx = el('text', 'bvc-tick', { x: M.l - 8, y: Y(r) + 5, 'text-anchor': 'end' });
      tx.textContent = `${Math.round(100 * r)}%`;
      axes.appendChild(tx);
    }
    const yt = el('text', 'bvc-title', { transform: `translate(16,${M.t + H / 2}) rotate(-90)`,
                                         'text-anchor': 'middle' });
    yt.textContent = d.labels.y;
    axes.appendChild(yt);
    // x: capacity in tokens (and GiB), ticks at 1, 2, 5 x 10^k as room allows
    const lo = d.lo * d.bs, hi = Math.max(d.hi, d.lo + 1) * d.bs;
    let ticks = [];
    for (const m of [[1], [1, 3], [1, 2, 5]]) {
      ticks = [];
      for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
        for (const k of m) { const v = k * 10 ** e; if (v >= lo && v <= hi) ticks.push(v); }
      }
      if (ticks.length >= 4) break;
    }
    for (const v of ticks) {
      const x = X(v / d.bs);
      grid.appendChild(el('line', '', { x1: x, x2: x, y1: M.t, y2: M.t + H }));
      const tx = el('text', 'bvc-tick', { x, y: M.t + H + 20, 'text-anchor': 'middle' });
      tx.textContent = c.fmt.format(v);
      axes.appendChild(tx);
      if (d.bpt) {
        const g = el('text', 'bvc-tick bvc-gib', { x, y: M.t + H + 37, 'text-anchor': 'middle' });
        g.textContent = gib(v, d.bpt);
        axes.appendChild(g);
      }
    }
    const xt = el('text', 'bvc-title', { x: M.l + W, y: height - 4, 'text-anchor': 'end' });
    xt.textContent = d.labels.x;
    axes.appendChild(xt);
    axes.appendChild(el('line', 'bvc-axis', { x1: M.l, x2: M.l + W, y1: M.t + H, y2: M.t + H }));
    svg.append(grid);
    // the columns: per pixel, each order's hits over the whole pool sizes it covers
    const cols = [];
    for (let px = 0; px < W; px++) {
      const a = Math.max(d.lo, Math.ceil(N(M.l + px) - 1e-9));
      const b = Math.min(d.hi, px + 1 >= W ? d.hi : Math.ceil(N(M.l + px + 1) - 1e-9) - 1);
      if (b < a) continue;
      cols.push({ a, b, x: px + 1 >= W ? M.l + W : X(a), s: c.orders.map((o) => span(o, a, b)) });
    }
    geo.cols = cols;
    // the best possible: exact at its sizes; between two, within what MIN's growth allows (at
    // least its smaller size's and LRU's there, at most its larger size's), drawn on a log axis
    const best = c.best;
    const layer = el('g', 'bvc-lines');
    if (best.length) {
      const line = [];
      for (const col of cols) {
        const n = (col.a + col.b) / 2;
        let j = 0;
        while (j + 1 < best.length && best[j + 1][0] <= n) j++;
        if (n < best[0][0] || n > best[best.length - 1][0]) continue;
        const [a, ha] = best[j], [b, hb] = best[Math.min(j + 1, best.length - 1)];
        const ra = ha / d.queries, rb = hb / d.queries;
        const f = b > a ? (Math.log(n) - Math.log(a)) / (Math.log(b) - Math.log(a)) : 0;
        const lru = Math.max(...col.s.map((s) => rate(s.max)));
        line.push([col.x, Math.max(ra + (rb - ra) * f, lru), rate(col.s[0].max)]);
      }
      if (line.length) {
        let gap = `M${line[0][0]},${Y(line[0][1])}`;
        for (const p of line) gap += `L${p[0]},${Y(p[1])}`;
        for (let k = line.length - 1; k >= 0; k--) gap += `L${line[k][0]},${Y(line[k][2])}`;
        layer.appendChild(el('path', 'bvc-gap', { d: gap + 'Z' }));
        // its label, where it is tallest away from the first knee's star and label
        const first = c.orders[0], kx = first && first.knee != null ? X(first.knee) : -1e9;
        let wide = null;
        for (const p of line) {
          if (Math.abs(p[0] - kx) < 140) continue;
          if (!wide || Y(p[2]) - Y(p[1]) > Y(wide[2]) - Y(wide[1])) wide = p;
        }
        if (wide && Y(wide[2]) - Y(wide[1]) > 30) {
          const gx = Math.max(M.l + 130, Math.min(M.l + W - 130, wide[0]));
          const gl = el('text', 'bvc-label bvc-gap-label', { x: gx, y: (Y(wide[1]) + Y(wide[2])) / 2 + 5,
                                                             'text-anchor': 'middle' });
          gl.textContent = d.labels.policy_gap;
          geo.gapLabel = gl;
        }
        let path = '';
        for (const p of line) path += `${path ? 'L' : 'M'}${p[0].toFixed(1)},${Y(p[1]).toFixed(1)}`;
        layer.appendChild(el('path', 'bvc-line bvc-o-best', { d: path }));
      }
    }
    // the ceiling
    layer.appendChild(el('line', 'bvc-line bvc-o-ceiling', { x1: M.l, x2: M.l + W, y1: Y(d.ceiling),
                                                              y2: Y(d.ceiling) }));
    const cl = el('text', 'bvc-label bvc-ceiling-label', { x: M.l + 8, y: Y(d.ceiling) - 8 });
    cl.textContent = fill(d.labels.ceiling_at, { rate: pct(d.ceiling) });
    // each order's step function, last first (the first order on top)
    for (let k = c.orders.length - 1; k >= 0; k--) {
      let path = '', prev = null;
      for (const col of cols) {
        const s = col.s[k];
        const y0 = Y(rate(s.first)), y1 = Y(rate(s.last));
        if (prev === null) path += `M${col.x.toFixed(1)},${y0.toFixed(1)}`;
        else path += `L${col.x.toFixed(1)},${prev.toFixed(1)}L${col.x.toFixed(1)},${y0.toFixed(1)}`;
        if (s.min !== s.max) {
          path += `L${col.x.toFixed(1)},${Y(rate(s.min)).toFixed(1)}L${col.x.toFixed(1)},${Y(rate(s.max)).toFixed(1)}`;
        }
        path += `L${col.x.toFixed(1)},${y1.toFixed(1)}`;
        prev = y1;
      }
      if (prev !== null) path += `L${M.l + W},${prev.toFixed(1)}`;
      layer.appendChild(el('path', `bvc-line bvc-o-${c.orders[k].id}`, { d: path }));
    }
    for (const [n, hits] of best) {
      layer.appendChild(el('circle', 'bvc-best-dot', { cx: X(n), cy: Y(hits / d.queries), r: 5 }));
    }
    svg.append(layer);
    // the knees: a star on each order's curve, the first order's marked down to the axis
    const knees = el('g', 'bvc-knees');
    c.orders.forEach((o, k) => {
      if (o.knee === null || o.knee === undefined) return;
      const x = X(o.knee), y = Y(rate(hitBlocks(o, o.knee)));
      if (k === 0) {
        knees.appendChild(el('line', 'bvc-knee-line', { x1: x, x2: x, y1: y, y2: M.t + H }));
        const right = x > M.l + W * 0.62;
        const t = el('text', 'bvc-label bvc-knee-label', { x: x + (right ? -10 : 10), y: M.t + H - 12,
                                                           'text-anchor': right ? 'end' : 'start' });
        t.textContent = fill(d.labels.knee_at, { cap: capacity(o.knee) });
        knees.appendChild(t);
      }
      knees.appendChild(el('path', 'bvc-knee', { d: STAR(x, y, k === 0 ? 12 : 9) }));
    });
    // the marker (under the knees' stars: at the knee, the star stays in sight)
    const mk = el('g', 'bvc-marker');
    mk.appendChild(el('line', 'bvc-mline', { y1: M.t, y2: M.t + H }));
    for (let k = c.orders.length - 1; k >= 0; k--) {     // the first order's dot on top
      mk.appendChild(el('circle', `bvc-mdot bvc-o-${c.orders[k].id}`, { r: 5, 'data-k': String(k) }));
    }
    mk.appendChild(el('path', 'bvc-grip', { d: 'M-9,0L9,0L9,12L0,20L-9,12Z' }));
    svg.append(axes, cl, mk, knees);
    if (geo.gapLabel) svg.append(geo.gapLabel);
    geo.marker = mk;
    hint.textContent = d.labels.drag;
  }

  function capacity(n) {
    const d = c.data;
    const tokens = n * d.bs;
    return `${c.full.format(tokens)} ${d.labels.tokens}${d.bpt ? ` · ${gib(tokens, d.bpt)}` : ''}`;
  }

  function bestAt(n) {                     // [lowest, highest] MIN can be at n (exact at its sizes)
    const b = c.best;
    if (!b.length || n < b[0][0] || n > b[b.length - 1][0]) return null;
    let j = 0;
    while (j + 1 < b.length && b[j + 1][0] <= n) j++;
    if (b[j][0] === n) return [b[j][1], b[j][1]];
    const lru = Math.max(...c.orders.map((o) => hitBlocks(o, n) * c.data.bs));
    return [Math.max(b[j][1], lru), b[j + 1][1]];
  }

  function mark() {
    const d = c.data, n = c.pool, L = d.labels;
    root.dataset.pool = String(n);
    svg.setAttribute('aria-valuenow', String(n));
    svg.setAttribute('aria-valuetext', capacity(n));
    // the readout
    read.textContent = '';
    const card = (cls, label, value, small, unit) => {
      const e = h('div', `bvc-card ${cls}`);
      const v = h('div', 'bvc-cv', value);
      if (unit) v.append(h('span', 'bvc-unit', ` ${unit}`));
      e.append(h('div', 'bvc-cl', label), v);
      if (small) e.append(h('div', 'bvc-cs', small));
      read.appendChild(e);
      return e;
    };
    const cap = card('bvc-cap', L.at, c.full.format(n * d.bs),
                     fill(L.blocks, { n: c.full.format(n), bs: d.bs }) +
                     (d.bpt ? ` · ${gib(n * d.bs, d.bpt)}` : ''), L.tokens);
    cap.dataset.pool = String(n);
    const rates = [];
    for (const o of c.orders) {
      const hits = hitBlocks(o, n) * d.bs;
      rates.push(hits / d.queries);
      const e = card(`bvc-o-${o.id}`, o.name, pct(hits / d.queries),
                     fill(L.hits_of, { hits: c.full.format(hits), queries: c.full.format(d.queries) }));
      e.dataset.order = o.id;
      e.dataset.hits = String(hits);
    }
    const band = bestAt(n);
    let above = rates[0];
    if (band) {
      const [a, b] = band.map((x) => x / d.queries);
      const e = card('bvc-o-best', L.best, a === b ? pct(a) : `${pct(a)}–${pct(b)}`,
                     fill(a === b ? L.best_above : L.best_above_band, { pts: (100 * (a - rates[0])).toFixed(1) }));
      e.dataset.best = String(band[0]);
      above = b;
    } else if (d.best_note) {
      card('bvc-o-best', L.best, '—', d.best_note);
    }
    card('bvc-o-ceiling', L.ceiling, pct(d.ceiling),
         fill(!band ? L.ceiling_above_lru : band[0] === band[1] ? L.ceiling_above_best : L.ceiling_above_best_band,
              { pts: (100 * (d.ceiling - above)).toFixed(1) }));
    // the marker
    if (!geo || !geo.marker) return;
    const x = geo.X(n);
    geo.marker.setAttribute('transform', `translate(${x.toFixed(1)},0)`);
    for (const dot of geo.marker.querySelectorAll('.bvc-mdot')) {
      dot.setAttribute('cy', geo.Y(rates[Number(dot.dataset.k)]).toFixed(1));
    }
    geo.marker.querySelector('.bvc-grip').setAttribute('transform', `translate(0,${M.t - 2})`);
  }

  function moveTo(n, send) {
    const v = clamp(n);
    if (v !== c.pool) { c.pool = v; mark(); }
    clearTimeout(c.timer);
    if (send === 'now') tell();
    else if (send) c.timer = setTimeout(tell, SEND_MS);
  }

  function tell() {
    if (c.pool === c.sent || !c.api || !c.api.setStateValue) return;
    c.sent = c.pool;
    c.api.setStateValue('pool', c.pool);
  }

  const poolAt = (ev) => {
    const r = svg.getBoundingClientRect();
    const px = Math.max(M.l, Math.min(M.l + geo.W, (ev.clientX - r.left) * (width / r.width)));
    return geo.N(px);
  };
  const onDown = (ev) => {
    if (!geo || ev.button !== 0) return;
    c.drag = true;
    svg.setPointerCapture(ev.pointerId);
    svg.focus({ preventScroll: true });
    moveTo(poolAt(ev), false);
    ev.preventDefault();
  };
  const onMove = (ev) => { if (c.drag) moveTo(poolAt(ev), false); };
  const onUp = (ev) => {
    if (!c.drag) return;
    c.drag = false;
    if (svg.hasPointerCapture(ev.pointerId)) svg.releasePointerCapture(ev.pointerId);
    moveTo(poolAt(ev), 'now');
  };
  const onKey = (ev) => {
    const n = c.pool;
    const by = { ArrowRight: n + 1, ArrowUp: n + 1, ArrowLeft: n - 1, ArrowDown: n - 1,
                 PageUp: Math.max(n + 1, n * 1.1), PageDown: Math.min(n - 1, n / 1.1),
                 Home: c.data.lo, End: c.data.hi }[ev.key];
    if (by === undefined) return;
    const big = ev.shiftKey && ev.key.startsWith('Arrow');
    moveTo(big ? (by > n ? n * 1.02 + 1 : n / 1.02 - 1) : by, true);
    ev.preventDefault();
  };
  svg.addEventListener('pointerdown', onDown);
  svg.addEventListener('pointermove', onMove);
  svg.addEventListener('pointerup', onUp);
  svg.addEventListener('pointercancel', onUp);
  svg.addEventListener('keydown', onKey);
  let resizeT = null;
  const ro = typeof ResizeObserver === 'undefined' ? null : new ResizeObserver(() => {
    clearTimeout(resizeT);
    resizeT = setTimeout(() => {
      if (c.data && Math.abs((root.clientWidth || 0) - width) > 2) { draw(); mark(); }
    }, 60);
  });
  if (ro) ro.observe(root);

  c.load = load;
  c.destroy = () => {
    clearTimeout(c.timer); clearTimeout(resizeT);
    if (ro) ro.disconnect();
    root.remove();
  };
  return c;
}
