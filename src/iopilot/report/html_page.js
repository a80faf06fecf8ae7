/* iopilot HTML report, core: decodes the embedded data, defines the shared
 * helpers (IOP.ui) and the page shell.
 *
 * Every number comes from Python (iopilot/report/html.py and views/*.py);
 * the scripts only lay it out.  Each view script (views/*.js, inlined after
 * this one in registry order) registers IOP.views[KEY] = { draw(sec, data, ui) };
 * IOP.start() then builds the page.  Views are drawn the first time their
 * tab is opened, so that plotly measures visible containers.  Each view's
 * <section> gets data-drawn="1" and data-plots="N" when done (the browser
 * tests read them).
 */
const IOP = { views: {}, writeHash: () => {} };
(function () {
  'use strict';

  // ---------------------------------------------------------------- data --

  const DTYPES = { f8: Float64Array, f4: Float32Array, i4: Int32Array, i2: Int16Array,
    u4: Uint32Array, u1: Uint8Array };

  function typed(o) {
    const bin = atob(o.$b64);
    const n = bin.length;
    const bytes = new Uint8Array(n);
    for (let i = 0; i < n; i++) bytes[i] = bin.charCodeAt(i);
    return new DTYPES[o.dtype](bytes.buffer);
  }

  function decode(o) {
    if (Array.isArray(o)) return o.map(decode);
    if (o && typeof o === 'object') {
      if (typeof o.$b64 === 'string') return typed(o);
      const out = {};
      for (const k of Object.keys(o)) out[k] = decode(o[k]);
      return out;
    }
    return o;
  }

  const D = decode(JSON.parse(document.getElementById('iopilot-data').textContent));
  const R = D.report;
  const LAB = D.labels;
  const REC = D.records;
  const FILES = D.files;
  const LAYER_CODE = {};
  D.record_layers.forEach((n, i) => { LAYER_CODE[n] = i; });
  const COL = { read: '#1f77b4', write: '#d62728', meta: '#8c8c8c', other: '#9467bd' };
  // Distinct hues: neighbouring size bins must not look alike.
  const SIZE_COL = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948',
    '#b07aa1', '#ff9da7', '#9c755f', '#17becf'];
  const SIZE_LABEL = D.size_labels;
  const SIZE_UPPER = D.size_upper; // inclusive upper edges, from iopilot.vocabulary
  const FS_TEXT = D.fs_layers.map((n) => LAB[n]).join(' + '); // what the file system sees
  // No view may offer to upload data: plotly.js 4 shows a "Share chart"
  // button that sends the chart to a cloud service unless told not to.
  const CONFIG = { displaylogo: false, responsive: true, showSendToCloud: false,
    plotlyServerURL: '', modeBarButtonsToRemove: ['select2d', 'lasso2d', 'sendChartToCloud'] };

  // ------------------------------------------------------------- helpers --

  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === null || v === undefined || v === false) continue;
        if (k === 'class') e.className = v;
        else if (k === 'text') e.textContent = v;
        else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, v === true ? '' : v);
      }
    }
    for (const kid of kids.flat(2)) {
      if (kid === null || kid === undefined || kid === false) continue;
      e.append(kid instanceof Node ? kid : String(kid));
    }
    return e;
  }

  function fmtBytes(b) {
    if (b === null || b === undefined || Number.isNaN(b)) return '–';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let x = Math.abs(b);
    let i = 0;
    while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
    const s = i === 0 ? x.toFixed(0) : x.toFixed(x < 10 ? 2 : 1);
    return (b < 0 ? '-' : '') + s + ' ' + u[i];
  }
  function fmtInt(n) {
    if (n === null || n === undefined || Number.isNaN(n)) return '–';
    return Math.round(n).toLocaleString('en-US');
  }
  function fmtNum(n) {
    if (n === null || n === undefined || Number.isNaN(n)) return '–';
    return Number.isInteger(n) ? n.toLocaleString('en-US') : n.toPrecision(4);
  }
  function fmtSec(s) {
    if (s === null || s === undefined || Number.isNaN(s)) return '–';
    const a = Math.abs(s);
    if (a === 0) return '0 s';
    if (a < 1e-3) return (s * 1e6).toPrecision(3) + ' µs';
    if (a < 1) return (s * 1e3).toPrecision(3) + ' ms';
    return a < 1000 ? s.toPrecision(4) + ' s' : s.toFixed(0) + ' s';
  }
  function fmtPct(x) { return x === null || x === undefined ? '–' : (100 * x).toFixed(1) + ' %'; }
  function fileName(i) {
    if (i === undefined || i === null || i < 0) return '(other files)';
    return FILES.names[i];
  }
  function shortName(s, n) {
    n = n || 70;
    return s.length <= n ? s : '…' + s.slice(s.length - n + 1);
  }
  function bytesExact(b) { return fmtBytes(b) + (b >= 1024 ? ' (' + fmtInt(b) + ' B)' : ''); }

  function select(label, options, onchange, value, id) {
    const s = h('select', { id: id || null, onchange: () => onchange(s.value) },
      options.map((o) => h('option', { value: o.value, text: o.label })));
    if (value !== undefined) s.value = value;
    return { el: h('label', null, label, s), sel: s };
  }

  function layout(extra) {
    const lay = Object.assign({
      margin: { l: 70, r: 20, t: 40, b: 50 }, hovermode: 'closest',
      font: { size: 12, family: 'system-ui, -apple-system, Segoe UI, Roboto, DejaVu Sans, sans-serif' },
      paper_bgcolor: '#fff', plot_bgcolor: '#fff',
      legend: { orientation: 'h', x: 0, y: 1.02, yanchor: 'bottom', traceorder: 'normal' },
      hoverlabel: { align: 'left' },
    }, extra);
    // Axes grow the margin their tick labels and titles need: nothing is clipped.
    const out = Object.assign({ xaxis: {}, yaxis: {} }, lay);
    Object.keys(out).forEach((k) => {
      if (/^[xy]axis\d*$/.test(k)) out[k] = Object.assign({ automargin: true }, out[k]);
    });
    return out;
  }

  // opts.title: a heading above the plot (plotly titles collide with legends);
  // opts.ops: the plot draws operations as segments (round caps keep short ones visible).
  function newPlot(holder, traces, lay, opts) {
    opts = opts || {};
    const div = h('div', { class: 'plot' + (opts.ops ? ' ops' : '') });
    holder.append(h('div', { class: 'plotbox' }, opts.title ? h('h3', { text: opts.title }) : null, div));
    Plotly.newPlot(div, traces, layout(lay), CONFIG);
    return div;
  }

  // Bytes on an axis in one binary unit (plotly's SI suffixes read "80B" for 80 GB).
  function byteUnit(maxv) {
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let i = 0;
    let x = maxv;
    while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
    return { div: Math.pow(1024, i), unit: u[i] };
  }
  function maxOf(...arrs) {
    let m = 0;
    arrs.forEach((a) => { for (let i = 0; i < a.length; i++) if (a[i] > m) m = a[i]; });
    return m;
  }
  function scaled(a, d) {
    const out = new Array(a.length);
    for (let i = 0; i < a.length; i++) out[i] = a[i] / d;
    return out;
  }
  function redraw(div, traces, lay) { Plotly.react(div, traces, layout(lay), CONFIG); }

  function card(title, ...kids) { return h('div', { class: 'card' }, title ? h('h2', { text: title }) : null, kids); }
  function note(text) { return h('p', { class: 'note', text: text }); }

  // opts.sortable: clicking a header sorts the rows (total rows, class "total", stay last).
  function table(cols, rows, opts) {
    opts = opts || {};
    const tbody = h('tbody');
    const fill = (list) => tbody.replaceChildren(...list.map((r) => h('tr', { class: r._class || null },
      cols.map((c) => h('td', { class: (c.text ? 't' : '') + (r._cell && r._cell[c.key] ? ' ' + r._cell[c.key] : '') || null,
        text: c.fmt ? c.fmt(r[c.key], r) : (r[c.key] === null || r[c.key] === undefined ? '–' : String(r[c.key])) })))));
    let order = null;
    const sortBy = (c) => {
      const dir = order && order.key === c.key ? -order.dir : (c.text ? 1 : -1);
      order = { key: c.key, dir: dir };
      const body = rows.filter((r) => r._class !== 'total');
      const tail = rows.filter((r) => r._class === 'total');
      const val = (r) => { const v = r[c.key]; return v === null || v === undefined ? -Infinity : v; };
      body.sort((a, b) => { const x = val(a); const y = val(b); return (x < y ? -1 : x > y ? 1 : 0) * dir; });
      fill(body.concat(tail));
    };
    const thead = h('thead', null, h('tr', null, cols.map((c) => h('th', {
      class: c.text ? 't' : null, text: c.label, title: opts.sortable ? 'click to sort' : null,
      style: opts.sortable ? 'cursor: pointer' : null, onclick: opts.sortable ? () => sortBy(c) : null }))));
    fill(rows);
    const t = h('table', { class: 'data', id: opts.id || null }, thead, tbody);
    return opts.scroll ? h('div', { class: 'scroll' }, t) : t;
  }

  // OSTs a request touches: (offset / stripe size) mod stripe count over the file's OSTs.
  function ostsOf(file, off, len) {
    const L = file >= 0 ? FILES.lustre[file] : null;
    if (!L || !L[1].length || off < 0) return null;
    const ss = L[0];
    const osts = L[1];
    const k0 = Math.floor(off / ss);
    const k1 = Math.floor((off + Math.max(len, 1) - 1) / ss);
    const out = [];
    for (let k = k0; k <= k1 && out.length < osts.length; k++) out.push(osts[k % osts.length]);
    return out;
  }

  function recordText(i) {
    const S = REC.sample;
    const lay = LAB[D.record_layers[S.layer[i]]];
    const op = D.op_names[S.op[i]];
    let t = 'rank ' + S.rank[i] + ' · ' + lay + ' ' + op +
      '<br>offset ' + fmtInt(S.offset[i]) + ' · size ' + bytesExact(S.length[i]) +
      '<br>start ' + S.start[i].toFixed(6) + ' s · duration ' + fmtSec(S.dur[i]) +
      '<br>file ' + escapeHtml(shortName(fileName(S.file[i]), 90));
    const o = ostsOf(S.file[i], S.offset[i], S.length[i]);
    if (o) t += '<br>OST' + (o.length > 1 ? 's ' : ' ') + o.join(', ');
    return t;
  }

  function escapeHtml(s) {
    return s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));
  }

  // Operations as line segments (one path per trace: fast in SVG, unlike one marker each).
  function segments(idx, xy, color, name, yaxis, width, textOf) {
    const n = idx.length;
    const x = new Array(n * 3);
    const y = new Array(n * 3);
    const text = new Array(n * 3);
    for (let j = 0; j < n; j++) {
      const i = idx[j];
      const p = xy(i);
      const t = textOf(i);
      x[3 * j] = p[0]; y[3 * j] = p[1]; text[3 * j] = t;
      x[3 * j + 1] = p[2]; y[3 * j + 1] = p[3]; text[3 * j + 1] = t;
      x[3 * j + 2] = null; y[3 * j + 2] = null; text[3 * j + 2] = null;
    }
    return { type: 'scatter', mode: 'lines', x: x, y: y, text: text, hoverinfo: 'text',
      name: name + ' (' + fmtInt(n) + ')', yaxis: yaxis, connectgaps: false,
      line: { color: color, width: width, simplify: false } };
  }

  function sampleIndex(pred) {
    const S = REC.sample;
    const out = [];
    for (let i = 0; i < S.n; i++) if (pred(i)) out.push(i);
    return out;
  }

  function layersPresent() {
    return D.record_layers.filter((n, i) => REC && REC.per_layer[i] > 0);
  }

  function rankAxis() {
    // One lane per rank, rank 0 at the bottom, integer ticks.
    return { range: [-0.5, D.nranks - 0.5], tickformat: 'd', dtick: D.nranks <= 16 ? 1 : null };
  }

  function laneWidth(lanes) { return Math.max(2, Math.min(8, 360 / Math.max(lanes, 1))); }


  // The URL hash names the open view and a finding: #view=phases&finding=3.
  function hashState() {
    const out = {};
    location.hash.replace(/^#/, '').split('&').forEach((kv) => {
      const [k, v] = kv.split('=');
      if (k) out[decodeURIComponent(k)] = decodeURIComponent(v || '');
    });
    return out;
  }


  function filesWithRecords() {
    // Listed files with operations, most operations first.
    const fc = REC.file_counts;
    const per = new Map();
    for (let j = 0; j < fc.file.length; j++) {
      const f = fc.file[j];
      if (f < 0) continue;
      const e = per.get(f) || { file: f, n: 0, drawn: 0, layers: {} };
      e.n += fc.n[j]; e.drawn += fc.drawn[j];
      e.layers[D.record_layers[fc.layer[j]]] = [fc.n[j], fc.drawn[j]];
      per.set(f, e);
    }
    return Array.from(per.values()).sort((a, b) => b.n - a.n || a.file - b.file);
  }


  // --------------------------------------------------------------- filter --
  // One time window [t0, t1] (s), rank range [r0, r1] and call site (an index
  // into D.sites) for every view; null is "no bound".  The URL hash keeps it
  // (#view=timeline&t0=1&t1=2&r0=0&r1=3&site=0).
  const FILTER = { t0: null, t1: null, r0: null, r1: null, site: null };
  const FILTER_KEYS = ['t0', 't1', 'r0', 'r1', 'site'];
  const SITES = D.sites || [];
  const filterListeners = [];
  function filterActive() { return FILTER_KEYS.some((k) => FILTER[k] !== null); }
  function timeActive() { return FILTER.t0 !== null || FILTER.t1 !== null; }
  function ranksActive() { return FILTER.r0 !== null || FILTER.r1 !== null; }
  function siteActive() { return FILTER.site !== null; }
  function siteName(k) { return k >= 0 && k < SITES.length ? SITES[k].label : '(other call sites)'; }
  // "main.c:42 write_rows — 4,096 calls, 1.23 s", as the terminal says it.
  function siteText(s) {
    return s.label + ' — ' + fmtInt(s.calls) + ' call' + (s.calls === 1 ? '' : 's') + ', ' + fmtSec(s.seconds) +
      (s.note ? ' (' + s.note + ')' : '');
  }
  // A sampled operation from the chosen call site (any, when none is chosen).
  function inSite(i) { return FILTER.site === null || (REC.sample.site !== undefined && REC.sample.site[i] === FILTER.site); }
  // Does [s, e] overlap the window?  Does [a, b] overlap the rank range?
  function inTime(s, e) { return (FILTER.t0 === null || e >= FILTER.t0) && (FILTER.t1 === null || s <= FILTER.t1); }
  function inRanks(a, b) {
    if (b === undefined) b = a;
    return (FILTER.r0 === null || b >= FILTER.r0) && (FILTER.r1 === null || a <= FILTER.r1);
  }
  // A sampled operation inside the filter.
  function inFilter(i) {
    const S = REC.sample;
    return inTime(S.start[i], S.start[i] + S.dur[i]) && inRanks(S.rank[i]) && inSite(i);
  }
  function filterText() {
    const parts = [];
    if (timeActive()) parts.push('time ' + (FILTER.t0 === null ? 'start' : FILTER.t0 + ' s') + ' – ' + (FILTER.t1 === null ? 'end' : FILTER.t1 + ' s'));
    if (ranksActive()) parts.push('ranks ' + (FILTER.r0 === null ? 0 : FILTER.r0) + ' – ' + (FILTER.r1 === null ? D.nranks - 1 : FILTER.r1));
    if (siteActive()) parts.push('call site ' + siteName(FILTER.site));
    return parts.join(', ');
  }
  // An x-axis range for plots over time: the window when one is set.
  function timeRange() {
    if (!timeActive()) return null;
    const lo = FILTER.t0 === null ? (REC ? REC.span[0] : 0) : FILTER.t0;
    const hi = FILTER.t1 === null ? (REC ? REC.span[1] : D.runtime) : FILTER.t1;
    return [lo, hi];
  }
  // fn(origin) runs after every change of the filter (origin: who changed it).
  function onFilter(fn) { filterListeners.push(fn); }
  function setFilter(next, origin) {
    FILTER_KEYS.forEach((k) => {
      if (!(k in next)) return;
      const v = next[k] === '' || next[k] === null || next[k] === undefined ? null : Number(next[k]);
      FILTER[k] = v === null || Number.isNaN(v) ? null : (k[0] === 'r' || k === 'site' ? Math.round(v) : v);
    });
    IOP.writeHash();
    filterListeners.forEach((fn) => fn(origin));
  }
  // A note that says whether the filter applies to what is next to it.
  // applies: which parts of the filter the element honours ('time', 'ranks').
  function filterNote(what, applies) {
    const e = h('p', { class: 'note filter-note' });
    const upd = () => {
      e.hidden = !filterActive();
      if (e.hidden) return;
      const off = [];
      if (timeActive() && applies.indexOf('time') < 0) off.push('the time window');
      if (ranksActive() && applies.indexOf('ranks') < 0) off.push('the rank range');
      if (siteActive() && applies.indexOf('site') < 0) off.push('the call site');
      e.textContent = 'Filter active (' + filterText() + '): ' + (off.length
        ? what + ' cover' + (what.endsWith('s') ? '' : 's') + ' the whole run, not ' + off.join(' or ') + '.'
        : what + ' show' + (what.endsWith('s') ? '' : 's') + ' only what lies inside it.');
    };
    upd();
    onFilter(upd);
    return e;
  }
  function filterBar() {
    const inputs = {};
    const field = (k, label, step) => {
      inputs[k] = h('input', { type: 'number', id: 'filter-' + k, step: step, size: 8,
        onchange: () => setFilter({ [k]: inputs[k].value }, 'bar') });
      return h('label', null, label, inputs[k]);
    };
    const status = h('span', { class: 'note', id: 'filter-status' });
    const bar = h('div', { class: 'filterbar', id: 'filter-bar' },
      h('strong', { text: 'Filter' }), field('t0', 'start (s)', 'any'), field('t1', 'end (s)', 'any'),
      field('r0', 'first rank', 1), field('r1', 'last rank', 1),
      siteField(),
      h('button', { type: 'button', id: 'filter-reset', text: 'reset', onclick: () => setFilter({ t0: null, t1: null, r0: null, r1: null, site: null }, 'bar') }),
      status);
    // Traces with call sites: choose one; every view draws only its operations.
    function siteField() {
      if (!SITES.length) return null;
      const opts = [{ value: '', label: 'all call sites' }].concat(SITES.map((s, k) => ({ value: String(k), label: shortName(siteText(s), 90) })));
      const sel = select('call site', opts, (v) => setFilter({ site: v }, 'bar'), '', 'filter-site');
      inputs.site = sel.sel;
      return sel.el;
    }
    const sync = () => {
      FILTER_KEYS.forEach((k) => {
        if (!inputs[k]) return;
        const v = FILTER[k] === null ? '' : String(FILTER[k]);
        if (inputs[k].value !== v) inputs[k].value = v;
      });
      status.textContent = filterActive() ? 'active: ' + filterText() : 'whole run, all ranks' + (SITES.length ? ', all call sites' : '');
    };
    sync();
    onFilter(sync);
    return bar;
  }

  // ---------------------------------------------------------------- shell --

  // Pages with this many drawn operations show a "drawing…" indicator in a
  // view before its first draw (which then takes a noticeable moment).
  const SLOW_DRAW = 10000;
  const SLOW_PAGE = !!REC && REC.drawn >= SLOW_DRAW;

  function build() {
    const app = document.getElementById('app');
    app.replaceChildren();
    const src = R.source;
    const top = h('header', { class: 'top' },
      h('h1', { text: 'iopilot report: ' + (src.split('/').filter(Boolean).pop() || src) }),
      h('div', { class: 'sub', text: src + ' · ' + D.generator }));
    const nav = h('nav', { class: 'tabs' });
    top.append(nav);
    const main = h('main');
    app.append(top, filterBar(), main);
    if (R.warnings.length) {
      main.append(h('div', { class: 'banner warn', id: 'data-warnings' }, h('strong', { text: 'Data warnings — some figures are incomplete' }),
        h('ul', null, R.warnings.map((w) => h('li', { text: w })))));
    }
    if (D.notes.length) main.append(h('div', { class: 'banner note' }, h('ul', null, D.notes.map((w) => h('li', { text: w })))));
    const VIEWS = D.view_list.filter((v) => v.offered && IOP.views[v.key]);
    // Views not offered, grouped by what the source lacks for them.
    const missing = {};
    D.view_list.filter((v) => !v.offered).forEach((v) => { (missing[v.needs] = missing[v.needs] || []).push(v.title); });
    Object.entries(missing).forEach(([needs, titles]) => main.append(h('p', { class: 'note',
      text: 'Not available for this source (no ' + needs + '): ' + titles.join(', ') + '.' })));
    const sections = {};
    VIEWS.forEach((v) => {
      const s = h('section', { class: 'view', id: 'view-' + v.key, 'data-view': v.key });
      sections[v.key] = s;
      main.append(s);
      nav.append(h('button', { type: 'button', id: 'tab-' + v.key, 'data-view': v.key, text: v.title, onclick: () => show(v.key) }));
    });

    let current = { view: 'summary' };
    IOP.writeHash = () => {
      const want = '#view=' + current.view + (current.finding !== undefined ? '&finding=' + current.finding : '') +
        FILTER_KEYS.filter((k) => FILTER[k] !== null).map((k) => '&' + k + '=' + FILTER[k]).join('');
      if (location.hash !== want) history.replaceState(null, '', want);
    };
    function show(id, finding) {
      if (!sections[id]) id = 'summary';
      current = { view: id, finding: finding };
      IOP.writeHash();
      nav.querySelectorAll('button').forEach((b) => b.classList.toggle('active', b.dataset.view === id));
      Object.entries(sections).forEach(([k, s]) => s.classList.toggle('active', k === id));
      const s = sections[id];
      if (s.dataset.pending) return;
      if (!s.dataset.drawn) {
        const drawNow = () => {
          try {
            IOP.views[id].draw(s, D.views[id], IOP.ui);
          } catch (e) {
            s.append(h('div', { class: 'banner error', text: 'This view failed to draw: ' + e }));
            throw e;
          } finally {
            s.querySelectorAll(':scope > .drawing').forEach((e) => e.remove());
            delete s.dataset.pending;
            s.dataset.drawn = '1';
            s.dataset.plots = String(s.querySelectorAll('.plot').length);
          }
        };
        if (!SLOW_PAGE) { drawNow(); return; }
        // A big page: say so first, and draw once the browser has painted that.
        s.dataset.pending = '1';
        s.append(h('div', { class: 'drawing', id: 'drawing-' + id, role: 'status' },
          h('span', { class: 'spinner' }), 'drawing ' + fmtInt(REC.drawn) + ' operations…'));
        requestAnimationFrame(() => setTimeout(drawNow, 0));
      } else {
        s.querySelectorAll('.js-plotly-plot').forEach((p) => Plotly.Plots.resize(p));
      }
    }
    function follow() {
      const st = hashState();
      // Links inside the page name no filter: the current one stays.
      if (FILTER_KEYS.some((k) => k in st)) {
        const next = {};
        FILTER_KEYS.forEach((k) => { next[k] = st[k] === undefined ? null : st[k]; });
        setFilter(next, 'hash');
      }
      show(st.view || 'summary', st.finding);
      const f = st.finding !== undefined ? document.getElementById('finding-' + st.finding) : null;
      document.querySelectorAll('.finding.linked').forEach((e) => e.classList.remove('linked'));
      if (f) f.classList.add('linked');
    }
    window.addEventListener('hashchange', follow);
    follow();
  }

  // What every view script may use (add to it; never rename or remove).
  IOP.ui = { D, R, REC, LAB, FILES, LAYER_CODE, COL, SIZE_COL, SIZE_LABEL, SIZE_UPPER, FS_TEXT,
    CONFIG, h, fmtBytes, fmtInt, fmtNum, fmtSec, fmtPct, fileName, shortName, bytesExact, select,
    layout, newPlot, byteUnit, maxOf, scaled, redraw, card, note, table, ostsOf, recordText,
    escapeHtml, segments, sampleIndex, layersPresent, rankAxis, laneWidth, hashState,
    filesWithRecords, FILTER, filterActive, timeActive, ranksActive, inTime, inRanks, inFilter,
    filterText, timeRange, onFilter, setFilter, filterNote, SITES, siteActive, siteName, siteText, inSite };
  IOP.start = build;
})();
