/* iopilot HTML report: decodes the embedded data and draws the views.
 *
 * Every number comes from Python (iopilot/report/html.py); this script only
 * lays it out.  Views are drawn the first time their tab is opened, so that
 * plotly measures visible containers.  Each view's <section> gets
 * data-drawn="1" and data-plots="N" when done (the browser tests read them).
 */
(function () {
  'use strict';

  // ---------------------------------------------------------------- data --

  const DTYPES = { f8: Float64Array, f4: Float32Array, i4: Int32Array, u4: Uint32Array,
    u1: Uint8Array };

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

  // --------------------------------------------------------------- views --

  const VIEWS = [
    { id: 'summary', title: 'Summary', ok: true, draw: drawSummary },
    { id: 'timeline', title: 'Timeline', ok: !!REC, draw: drawTimeline },
    { id: 'sizes', title: 'Request sizes', ok: !!REC || Object.keys(D.sizes).length > 0, draw: drawSizes },
    { id: 'spatiality', title: 'Spatiality', ok: !!REC, draw: drawSpatiality },
    { id: 'phases', title: 'Phases & stragglers', ok: !!D.phases, draw: drawPhases },
    { id: 'fs', title: 'File system, files & ranks', ok: true, draw: drawFs },
  ];

  // ------------------------------------------------------------- summary --

  function drawSummary(sec) {
    const job = R.job;
    const ov = D.overview;
    const start = job.start ? new Date(job.start * 1000).toISOString().replace('T', ' ').slice(0, 19) + ' UTC' : '–';
    const mods = R.modules.map((m) => h('span', null, m.name,
      m.partial ? h('span', { class: 'badge partial', text: 'partial' }) : null,
      m.used ? null : h('span', { class: 'note', text: ' (not used)' }), ' '));
    const kv = h('dl', { class: 'kv' },
      h('dt', { text: 'executable' }), h('dd', { text: job.executable || '(unknown)' }),
      h('dt', { text: 'ranks' }), h('dd', { text: fmtInt(job.nprocs) + (job.hosts ? ' on ' + job.hosts + ' host(s)' : '') }),
      h('dt', { text: 'runtime' }), h('dd', { text: fmtSec(job.runtime) + ' (started ' + start + ')' }),
      h('dt', { text: 'job id' }), h('dd', { text: String(job.jobid) }),
      h('dt', { text: 'source' }), h('dd', { text: job.format + (job.writer ? ' · ' + job.writer : '') }),
      h('dt', { text: 'modules' }), h('dd', null, mods.length ? mods : '–'),
      h('dt', { text: 'operations traced' }), h('dd', { text: REC ? fmtInt(REC.total) + (REC.sampled ? ' (drawn: a sample of ' + fmtInt(REC.drawn) + ')' : '') : 'none (counters only: no timeline, spatiality or phases)' }));

    const figs = h('div', { class: 'figures' });
    const fig = (v, l) => figs.append(h('div', { class: 'figure' }, h('div', { class: 'v', text: v }), h('div', { class: 'l', text: l })));
    const it = R.io_time;
    if (it) {
      const layers = Object.entries(it.by_layer.slowest_rank).filter((kv) => kv[1] > 0)
        .sort((a, b) => b[1] - a[1]).map((kv) => kv[0] + ' ' + fmtSec(kv[1])).join(', ');
      const what = 'in I/O on the slowest rank (rank ' + it.slowest_rank + ': ' + fmtSec(it.slowest_rank_seconds) +
        (layers ? '; ' + layers : '') + ')';
      if (it.share !== null && it.share !== undefined) fig(fmtPct(it.share), 'of the run ' + what);
      else fig(fmtSec(it.slowest_rank_seconds), what + ', run time unknown');
    }
    if (ov.busy_share !== undefined && ov.busy_share !== null) {
      fig(fmtPct(ov.busy_share), 'of the run with some ' + ov.busy_layer + ' operation in flight (' + fmtSec(ov.busy_seconds) + ', traced)');
    }
    let rb = 0; let wb = 0;
    R.layers.forEach((l) => { if (D.fs_display.indexOf(l.layer) >= 0) { rb += l.bytes_read; wb += l.bytes_written; } });
    if (rb + wb > 0) { fig(fmtBytes(rb), 'read (' + FS_TEXT + ')'); fig(fmtBytes(wb), 'written (' + FS_TEXT + ')'); }
    const c = R.counts;
    fig(c.HIGH + ' / ' + c.WARN, 'critical issues / warnings');

    sec.append(card('Job', kv, figs));

    const fsRows = ov.filesystems.map((f) => ({ mount: f.mount || '(no mount entry)', type: f.type || '–', files: f.files, bytes: f.bytes }));
    if (fsRows.length) {
      sec.append(card('File systems used',
        table([{ key: 'mount', label: 'mount point', text: true }, { key: 'type', label: 'type', text: true },
          { key: 'files', label: 'files', fmt: fmtInt }, { key: 'bytes', label: 'bytes (' + FS_TEXT + ')', fmt: fmtBytes }], fsRows, { scroll: fsRows.length > 12 })));
    }

    const cats = ov.categories || [];
    if (cats.length) {
      const both = (k) => ({ key: k, label: k.replace('_', ' ').replace('_', '-'), fmt: (v, r) => fmtInt(v) + ' (' + fmtBytes(r[k + '_bytes']) + ')' });
      sec.append(card('Files by category',
        table([{ key: 'layer', label: 'interface', text: true }, { key: 'files', label: 'files', fmt: fmtInt },
          both('read_only'), both('write_only'), both('read_write'), both('no_data'), both('shared'), both('unique')],
        cats, { id: 'category-table' }),
        note('Per interface: files only read, only written, both, or opened without data; shared files are those more than one rank used (or that the log keeps as one record reduced over all ranks). Bytes in brackets.')));
    }

    if (R.layers.length) {
      const L = R.layers;
      // The cost of each interface: the slowest rank's seconds in it (each
      // operation counted once, at its file's highest layer) and their share of the run.
      const slow = it ? it.by_layer.slowest_rank : {};
      const rows = L.map((l) => Object.assign({}, l, {
        slow_s: slow[l.layer] === undefined ? null : slow[l.layer],
        slow_share: it && it.run_seconds > 0 && slow[l.layer] !== undefined ? slow[l.layer] / it.run_seconds : null,
      }));
      const tc = card('Interfaces',
        table([{ key: 'layer', label: 'interface', text: true },
          { key: 'slow_s', label: 'I/O s (slowest rank)', fmt: (v) => v === null ? '–' : fmtSec(v) },
          { key: 'slow_share', label: '% of run', fmt: fmtPct },
          { key: 'files', label: 'files', fmt: fmtInt },
          { key: 'reads', label: 'reads', fmt: fmtInt }, { key: 'writes', label: 'writes', fmt: fmtInt },
          { key: 'opens', label: 'opens', fmt: fmtInt }, { key: 'stats', label: 'stats', fmt: fmtInt },
          { key: 'seeks', label: 'seeks', fmt: fmtInt }, { key: 'syncs', label: 'syncs', fmt: fmtInt },
          { key: 'bytes_read', label: 'read', fmt: fmtBytes }, { key: 'bytes_written', label: 'written', fmt: fmtBytes },
          { key: 'read_time', label: 'read time', fmt: fmtSec }, { key: 'write_time', label: 'write time', fmt: fmtSec },
          { key: 'meta_time', label: 'metadata time', fmt: fmtSec }], rows, { id: 'interface-table' }),
        note('"I/O s (slowest rank)" counts each operation once, at the highest interface of its file, on the rank with the most I/O seconds; "% of run" is that time\'s share of the run. ' +
          'The other times are summed over all ranks, and MPI-IO and HDF5 calls are carried out by POSIX calls underneath, so there their bytes and times are counted again at the POSIX level.'));
      sec.append(tc);
      const g = h('div', { class: 'grid2' });
      tc.append(g);
      const names = L.map((l) => l.layer);
      const bu = byteUnit(maxOf(L.map((l) => l.bytes_read), L.map((l) => l.bytes_written)));
      newPlot(g, [
        { type: 'bar', name: 'read', x: names, y: L.map((l) => l.bytes_read / bu.div), marker: { color: COL.read },
          text: L.map((l) => l.layer + ': ' + bytesExact(l.bytes_read) + ' read in ' + fmtInt(l.reads) + ' reads'), hoverinfo: 'text', textposition: 'none' },
        { type: 'bar', name: 'written', x: names, y: L.map((l) => l.bytes_written / bu.div), marker: { color: COL.write },
          text: L.map((l) => l.layer + ': ' + bytesExact(l.bytes_written) + ' written in ' + fmtInt(l.writes) + ' writes'), hoverinfo: 'text', textposition: 'none' },
      ], { barmode: 'group', yaxis: { title: { text: bu.unit } }, height: 320 }, { title: 'Bytes per interface' });
      newPlot(g, ['read_time', 'write_time', 'meta_time'].map((k, j) => ({
        type: 'bar', name: ['read', 'write', 'metadata'][j], x: names, y: L.map((l) => l[k]),
        marker: { color: [COL.read, COL.write, COL.meta][j] }, hovertemplate: '%{x}: %{y:.4g} s<extra>%{fullData.name}</extra>' })),
      { barmode: 'stack', yaxis: { title: { text: 'seconds' } }, height: 320 }, { title: 'Time per interface (seconds, summed over ranks)' });
    }

    const fc = card('Findings (' + c.HIGH + ' critical, ' + c.WARN + ' warnings, ' + c.INFO + ' notes)');
    if (!R.findings.length) fc.append(note('No check fired.'));
    R.findings.forEach((f, i) => fc.append(findingEl(f, i)));
    const fired = Object.entries(R.thresholds_fired || {});
    if (fired.length) fc.append(note('Thresholds behind these findings: ' + fired.map(([k, v]) => k + '=' + v).join(', ')));
    sec.append(fc);
  }

  function findingEl(f, i) {
    const code = f.check + (f.drishti ? ' · Drishti ' + f.drishti : ' · new');
    const box = h('div', { class: 'finding ' + f.level, id: 'finding-' + i },
      h('div', null, h('span', { class: 'badge ' + f.level, text: f.level }), f.message),
      h('div', { class: 'meta', text: f.layer + ' · ' + code + (f.drishti_note ? ' — ' + f.drishti_note : '') }));
    if (f.files && f.files.length) {
      const keys = [];
      f.files.forEach((e) => Object.keys(e).forEach((k) => { if (k !== 'path' && keys.indexOf(k) < 0) keys.push(k); }));
      const cols = [{ key: 'path', label: 'file / item', text: true }].concat(keys.map((k) => ({ key: k, label: k, fmt: (v) => typeof v === 'number' ? fmtNum(v) : (v === undefined ? '–' : String(v)) })));
      const more = f.files_total > f.files.length ? ' (' + f.files.length + ' of ' + f.files_total + ')' : '';
      box.append(h('details', null, h('summary', { text: 'evidence' + more }), table(cols, f.files, { scroll: f.files.length > 10 })));
    }
    if (f.recommendation) box.append(h('div', { class: 'rec', text: f.recommendation }));
    if (f.snippet) box.append(h('pre', { class: 'snippet' }, h('code', { text: f.snippet })));
    // A deep link to the view that shows it; the URL keeps it (#view=...&finding=...).
    const view = VIEWS.find((v) => v.id === D.finding_views[i] && v.ok);
    if (view && view.id !== 'summary') {
      box.append(h('a', { class: 'show-in', href: '#view=' + view.id + '&finding=' + i, text: 'show in ' + view.title + ' →' }));
    }
    return box;
  }

  // The URL hash names the open view and a finding: #view=phases&finding=3.
  function hashState() {
    const out = {};
    location.hash.replace(/^#/, '').split('&').forEach((kv) => {
      const [k, v] = kv.split('=');
      if (k) out[decodeURIComponent(k)] = decodeURIComponent(v || '');
    });
    return out;
  }

  // ------------------------------------------------------------ timeline --

  function panelChoices() {
    const present = layersPresent();
    const out = [];
    D.stacks.forEach(([upper, base]) => {
      if (present.indexOf(upper) >= 0 && present.indexOf(base) >= 0) {
        out.push({ value: upper + '+' + base, label: LAB[upper] + ' above its ' + LAB[base] + ' calls' });
      }
    });
    present.forEach((n) => out.push({ value: n, label: LAB[n] }));
    return out;
  }

  function panelAxes(panels, title) {
    // Panels share the time axis; the first listed layer is drawn on top.
    const lay = { xaxis: { title: { text: title || 'time since job start (s)' }, anchor: 'y' + (panels.length > 1 ? panels.length : '') } };
    const gap = 0.06;
    const hgt = (1 - gap * (panels.length - 1)) / panels.length;
    panels.forEach((p, k) => {
      const bottom = (panels.length - 1 - k) * (hgt + gap);
      const name = k === 0 ? 'yaxis' : 'yaxis' + (k + 1);
      lay[name] = { title: { text: LAB[p] + ' rank' }, domain: [bottom, bottom + hgt], anchor: 'x', zeroline: false };
    });
    // The bottom panel carries the x axis.
    lay.xaxis.anchor = panels.length > 1 ? 'y' + panels.length : 'y';
    return lay;
  }
  function axisName(k) { return k === 0 ? 'y' : 'y' + (k + 1); }

  function heatTrace(L, metric, yaxis, showscale, cbY) {
    const B = REC.bins[L];
    const rows = B.rows;
    const cols = B.cols;
    const z = [];
    const text = [];
    for (let r = 0; r < rows; r++) { z.push(new Array(cols).fill(null)); text.push(new Array(cols).fill('')); }
    for (let j = 0; j < B.idx.length; j++) {
      const c = B.idx[j];
      const r = Math.floor(c / cols);
      const col = c - r * cols;
      const v = { busy: B.rt[j] + B.wt[j], read: B.rt[j], write: B.wt[j], bytes: B.rb[j] + B.wb[j], ops: B.rn[j] + B.wn[j] }[metric];
      if (metric === 'read' && B.rn[j] === 0 && B.rt[j] === 0) continue;
      if (metric === 'write' && B.wn[j] === 0 && B.wt[j] === 0) continue;
      z[r][col] = v;
      const r0 = r * B.per_row;
      const who = B.per_row > 1 ? 'ranks ' + r0 + '–' + (Math.min(r0 + B.per_row, D.nranks) - 1) : 'rank ' + r0;
      const t0 = B.t0 + col * B.width;
      text[r][col] = who + ' · ' + LAB[L] +
        '<br>' + t0.toFixed(4) + '–' + (t0 + B.width).toFixed(4) + ' s' +
        '<br>reads started: ' + fmtInt(B.rn[j]) + ' · ' + bytesExact(B.rb[j]) +
        '<br>writes started: ' + fmtInt(B.wn[j]) + ' · ' + bytesExact(B.wb[j]) +
        '<br>busy (operation-seconds in bin): read ' + fmtSec(B.rt[j]) + ', write ' + fmtSec(B.wt[j]);
    }
    const x = new Array(cols);
    for (let c = 0; c < cols; c++) x[c] = B.t0 + (c + 0.5) * B.width;
    const y = new Array(rows);
    for (let r = 0; r < rows; r++) y[r] = r * B.per_row + (B.per_row - 1) / 2;
    const scales = {
      read: [[0, '#deebf7'], [1, '#08306b']], write: [[0, '#fee0d2'], [1, '#67000d']],
      busy: 'Viridis', bytes: 'Viridis', ops: 'Viridis',
    };
    const unit = { busy: 's', read: 's', write: 's', bytes: 'B', ops: 'ops' }[metric];
    return { type: 'heatmap', x: x, y: y, z: z, text: text, hoverinfo: 'text', hoverongaps: false,
      colorscale: scales[metric], zmin: 0, yaxis: yaxis, showscale: showscale, name: LAB[L],
      colorbar: { title: { text: unit }, len: 0.4, y: cbY, thickness: 12 } };
  }

  function drawTimeline(sec) {
    const choices = panelChoices();
    const c = card('Operation timeline');
    sec.append(c);
    const controls = h('div', { class: 'controls' });
    c.append(controls);
    const msg = note('');
    c.append(msg);
    const holder = h('div');
    c.append(holder);
    const binned = Object.keys(REC.bins);
    const state = { panels: choices[0].value, mode: binned.length ? 'bins' : 'sample', metric: 'busy', file: '-2' };
    controls.append(select('interface', choices, (v) => { state.panels = v; draw(); }, undefined, 'timeline-layer').el);
    if (binned.length) {
      controls.append(select('show', [{ value: 'bins', label: 'bins (exact sums)' }, { value: 'sample', label: 'sampled operations' }],
        (v) => { state.mode = v; draw(); }, undefined, 'timeline-mode').el);
      controls.append(select('bin colour', [
        { value: 'busy', label: 'busy time, reads + writes' }, { value: 'read', label: 'busy time, reads' },
        { value: 'write', label: 'busy time, writes' }, { value: 'bytes', label: 'bytes' }, { value: 'ops', label: 'operations' }],
      (v) => { state.metric = v; draw(); }, undefined, 'timeline-metric').el);
    }
    const fileOpts = [{ value: '-2', label: 'all files' }].concat(filesWithRecords().map((f) => ({ value: String(f.file), label: shortName(fileName(f.file), 80) + ' (' + fmtInt(f.n) + ' ops)' })));
    controls.append(select('file', fileOpts, (v) => { state.file = v; draw(); }, undefined, 'timeline-file').el);
    let div = null;

    function draw() {
      const panels = state.panels.split('+');
      const S = REC.sample;
      const lanes = D.nranks;
      const width = laneWidth(lanes);
      const file = Number(state.file);
      const traces = [];
      const parts = [];
      let binsShown = false;
      let opsShown = false;
      panels.forEach((L, k) => {
        const code = LAYER_CODE[L];
        const total = REC.per_layer[code];
        const yaxis = axisName(k);
        const useBins = state.mode === 'bins' && REC.bins[L] && file === -2;
        if (useBins) {
          const B = REC.bins[L];
          traces.push(heatTrace(L, state.metric, yaxis, true, 1 - (k + 0.5) / panels.length));
          parts.push(LAB[L] + ': all ' + fmtInt(B.records) + ' operations in ' + B.rows + ' rank row(s)' +
            (B.per_row > 1 ? ' of ' + B.per_row + ' ranks' : '') + ' × ' + B.cols + ' time bins of ' + fmtSec(B.width));
          binsShown = true;
          return;
        }
        for (const op of [0, 1]) {
          const idx = sampleIndex((i) => S.layer[i] === code && S.op[i] === op && (file === -2 || S.file[i] === file));
          traces.push(segments(idx, (i) => [S.start[i], S.rank[i], S.start[i] + S.dur[i], S.rank[i]],
            op ? COL.write : COL.read, LAB[L] + (op ? ' writes' : ' reads'), yaxis, width, recordText));
        }
        const drawn = REC.drawn_per_layer[code];
        opsShown = true;
        parts.push(LAB[L] + ': ' + (drawn < total ? 'a sample of ' + fmtInt(drawn) + ' of ' + fmtInt(total) + ' operations' : 'all ' + fmtInt(total) + ' operations') +
          (file === -2 ? '' : ', those on the chosen file'));
      });
      if (state.mode === 'bins' && binned.length && file !== -2) parts.push('bins cover all files: choosing a file shows sampled operations');
      if (binsShown) parts.push('In a bin, operations and bytes count where an operation starts; busy time is the exact overlap of operations with the bin (hover for the sums)');
      if (opsShown) parts.push('Each operation is a stroke from its start to its end: reads blue, writes red');
      msg.textContent = parts.join('. ') + '. Drag to zoom, double-click to reset.';
      const per = Math.min(720, Math.max(240, 90 + 5 * Math.min(lanes, 140)));
      const lay = Object.assign(panelAxes(panels), { height: per * panels.length + 60, showlegend: true });
      panels.forEach((p, k) => Object.assign(lay[k === 0 ? 'yaxis' : 'yaxis' + (k + 1)], rankAxis()));
      if (!div) div = newPlot(holder, traces, lay, { ops: true }); else redraw(div, traces, lay);
    }
    draw();
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

  // --------------------------------------------------------------- sizes --

  function drawSizes(sec) {
    const layers = Object.keys(D.sizes);
    const c = card('Request sizes (Darshan\'s size bins)');
    sec.append(c);
    if (layers.length) {
      const controls = h('div', { class: 'controls' });
      const msg = note('');
      const holder = h('div');
      c.append(controls, msg, holder);
      let div = null;
      const draw = (L) => {
        const s = D.sizes[L];
        msg.textContent = LAB[L] + ': every request counted, ' + (s.source === 'counters'
          ? 'from the size histograms in the counters' + (s.aggregate ? ' (aggregate sizes of the calls)' : '')
          : 'from the traced operations (no histogram counters for this interface)') + '.';
        const traces = [
          { type: 'bar', name: 'reads', x: SIZE_LABEL, y: s.read, marker: { color: COL.read }, hovertemplate: '%{x}: %{y:,} reads<extra></extra>' },
          { type: 'bar', name: 'writes', x: SIZE_LABEL, y: s.write, marker: { color: COL.write }, hovertemplate: '%{x}: %{y:,} writes<extra></extra>' },
        ];
        const lay = { barmode: 'group', height: 340, xaxis: { title: { text: 'request size' } }, yaxis: { title: { text: 'requests' } } };
        if (!div) div = newPlot(holder, traces, lay); else redraw(div, traces, lay);
      };
      controls.append(select('interface', layers.map((l) => ({ value: l, label: LAB[l] })), draw).el);
      draw(layers[0]);
    } else {
      c.append(note('No size histograms: the source has no histogram counters.'));
    }
    if (!REC) return;
    const c2 = card('Request sizes per rank over time');
    sec.append(c2);
    const controls = h('div', { class: 'controls' });
    const msg = note('');
    const holder = h('div');
    c2.append(controls, msg, holder);
    let div = null;
    const present = layersPresent();
    const draw = (L) => {
      const S = REC.sample;
      const code = LAYER_CODE[L];
      const traces = [];
      const width = laneWidth(D.nranks);
      for (let b = 0; b < SIZE_UPPER.length; b++) {
        const lo = b ? SIZE_UPPER[b - 1] : -1;
        const idx = sampleIndex((i) => S.layer[i] === code && S.length[i] > lo && S.length[i] <= SIZE_UPPER[b]);
        if (!idx.length) continue;
        const t = segments(idx, (i) => [S.start[i], S.rank[i], S.start[i] + S.dur[i], S.rank[i]], SIZE_COL[b % SIZE_COL.length], SIZE_LABEL[b], 'y', width, recordText);
        traces.push(t);
      }
      const total = REC.per_layer[code];
      const drawn = REC.drawn_per_layer[code];
      msg.textContent = LAB[L] + ': ' + (drawn < total ? 'a sample of ' + fmtInt(drawn) + ' of ' + fmtInt(total) : 'all ' + fmtInt(total)) +
        ' operations, each drawn from its start to its end on its rank\'s lane, coloured by size bin (click a legend entry to hide a bin).';
      const lay = { height: Math.min(720, Math.max(300, 120 + 5 * Math.min(D.nranks, 140))), xaxis: { title: { text: 'time since job start (s)' } },
        yaxis: Object.assign({ title: { text: LAB[L] + ' rank' }, zeroline: false }, rankAxis()) };
      if (!div) div = newPlot(holder, traces, lay, { ops: true }); else redraw(div, traces, lay);
    };
    controls.append(select('interface', present.map((l) => ({ value: l, label: LAB[l] })), draw).el);
    draw(present[0]);
  }

  // ----------------------------------------------------------- spatiality --

  function drawSpatiality(sec) {
    const files = filesWithRecords();
    const c = card('Spatiality: file offset over time');
    sec.append(c);
    if (!files.length) { c.append(note('No traced operation falls on a named file.')); return; }
    const controls = h('div', { class: 'controls' });
    const msg = note('');
    const holder = h('div');
    c.append(controls, msg, holder);
    const state = { file: files[0].file, layer: null, rank: 'all' };
    let div = null;
    const layerBox = h('span');
    const rankBox = h('span');
    const fileSel = select('file', files.map((f) => ({ value: String(f.file), label: shortName(fileName(f.file), 90) + ' (' + fmtInt(f.n) + ' ops)' })),
      (v) => { state.file = Number(v); state.layer = null; state.rank = 'all'; refresh(); }, undefined, 'file-select');
    controls.append(fileSel.el, layerBox, rankBox);

    function refresh() {
      const f = files.find((e) => e.file === state.file);
      const layers = Object.keys(f.layers);
      if (!state.layer || layers.indexOf(state.layer) < 0) state.layer = layers.indexOf(D.fs_layers[0]) >= 0 ? D.fs_layers[0] : layers[0];
      layerBox.replaceChildren(select('interface', layers.map((l) => ({ value: l, label: LAB[l] + ' (' + fmtInt(f.layers[l][0]) + ')' })),
        (v) => { state.layer = v; state.rank = 'all'; refresh(); }, state.layer).el);
      const S = REC.sample;
      const code = LAYER_CODE[state.layer];
      const idx = sampleIndex((i) => S.file[i] === state.file && S.layer[i] === code);
      const ranks = Array.from(new Set(idx.map((i) => S.rank[i]))).sort((a, b) => a - b);
      if (ranks.length > 1 && ranks.length <= 4096) {
        rankBox.replaceChildren(select('rank', [{ value: 'all', label: 'all ranks (' + ranks.length + ')' }].concat(ranks.map((r) => ({ value: String(r), label: 'rank ' + r }))),
          (v) => { state.rank = v; draw(idx); }, state.rank).el);
      } else rankBox.replaceChildren();
      draw(idx);
    }

    function draw(all) {
      const S = REC.sample;
      const f = files.find((e) => e.file === state.file);
      const [n, drawn] = f.layers[state.layer];
      const idx = state.rank === 'all' ? all : all.filter((i) => S.rank[i] === Number(state.rank));
      let top = 0;
      idx.forEach((i) => { top = Math.max(top, S.offset[i] + S.length[i]); });
      const bu = byteUnit(top);
      const traces = [0, 1].map((op) => segments(idx.filter((i) => S.op[i] === op),
        (i) => [S.start[i], S.offset[i] / bu.div, S.start[i], (S.offset[i] + Math.max(S.length[i], 0)) / bu.div],
        op ? COL.write : COL.read, op ? 'writes' : 'reads', 'y', 3, recordText));
      msg.textContent = (drawn < n ? 'A sample of ' + fmtInt(drawn) + ' of ' + fmtInt(n) : 'All ' + fmtInt(n)) + ' ' + LAB[state.layer] +
        ' operations on this file' + (state.rank === 'all' ? '' : ', rank ' + state.rank + ' only') +
        '. Each operation is a vertical stroke at its start time covering the bytes it accessed; hover for rank, size and duration.';
      const lay = { height: 480, xaxis: { title: { text: 'time since job start (s)' } }, yaxis: { title: { text: 'file offset (' + bu.unit + ')' }, zeroline: false } };
      if (!div) div = newPlot(holder, traces, lay, { ops: true }); else redraw(div, traces, lay);
    }
    refresh();
  }

  // --------------------------------------------------------------- phases --

  function drawPhases(sec) {
    const P = D.phases;
    const layers = Object.keys(P.layers);
    const c = card('I/O phases and stragglers');
    sec.append(c);
    const controls = h('div', { class: 'controls' });
    const msg = note('');
    const plots = h('div', { class: 'grid2' });
    const tableBox = h('div');
    c.append(controls, msg, plots, tableBox);
    const state = { layer: P.primary, option: 0 };
    const gapBox = h('span');
    let d1 = null;
    let d2 = null;
    const lim = D.thresholds.straggler_ratio;
    controls.append(select('interface', layers.map((l) => ({ value: l, label: LAB[l] })), (v) => { state.layer = v; state.option = 0; refresh(); }, state.layer).el, gapBox);

    function refresh() {
      const opts = P.layers[state.layer].options;
      gapBox.replaceChildren(select('phase gap', opts.map((o, k) => ({ value: String(k), label: o.label })),
        (v) => { state.option = Number(v); draw(); }, String(state.option), 'gap-select').el);
      draw();
    }

    function draw() {
      const o = P.layers[state.layer].options[state.option];
      const C = o.cols;
      const n = o.shown;
      const idx = Array.from(o.index);
      msg.textContent = fmtInt(o.total) + ' phase(s) of ' + LAB[state.layer] + ' operations' +
        (o.gap ? ' (busy intervals joined across idle gaps of at most ' + o.gap + ' s)' : ' (busy intervals joined across gaps shorter than the mean gap and ' + (100 * P.min_gap_share) + ' % of the traced span' +
          (REC ? ', ' + fmtSec(P.min_gap_share * (REC.span[1] - REC.span[0])) : '') + ': no shorter gap splits a phase)') +
        '; ' + o.stragglers + ' with a straggler (slowest rank over ' + lim + '× the median rank)' +
        (n < o.total ? '; the ' + fmtInt(n) + ' longest are listed' : '') + '. Rank times are the sum of each rank\'s operation durations in the phase.' +
        (P.layers[state.layer].options.length === 1 ? ' Other gaps are offered for ' + LAB[P.primary] + ', the layer the checks use.' : '');
      const label = idx.map((i) => 'phase ' + (i + 1));
      const strag = Array.from(o.straggler);
      const hover = idx.map((i, j) => 'phase ' + (i + 1) + ': ' + C.start[j].toFixed(4) + '–' + C.end[j].toFixed(4) + ' s (' + fmtSec(C.duration[j]) + ')' +
        '<br>' + fmtInt(C.ops[j]) + ' ops, ' + fmtBytes(C.bytes[j]) + ', ' + fmtInt(C.ranks[j]) + ' rank(s)' +
        '<br>fastest rank ' + C.fastest_rank[j] + ': ' + fmtSec(C.fastest_time[j]) + ' · median ' + fmtSec(C.median_time[j]) +
        '<br>slowest rank ' + C.slowest_rank[j] + ': ' + fmtSec(C.slowest_time[j]) + ' (' + o.ratio[j].toPrecision(3) + '× median)');
      // Phase spans on the time axis, stragglers in orange.
      const tr1 = [0, 1].map((s) => {
        const js = [];
        for (let j = 0; j < n; j++) if (strag[j] === s) js.push(j);
        return { type: 'bar', orientation: 'h', name: (s ? 'phases with a straggler' : 'phases') + ' (' + js.length + ')',
          base: js.map((j) => C.start[j]), x: js.map((j) => C.duration[j]), y: js.map(() => 'phases'),
          text: js.map((j) => hover[j]), hoverinfo: 'text', textposition: 'none', marker: { color: s ? '#e8710a' : '#2456a6' }, width: 0.6 };
      });
      const lay1 = { height: 260, barmode: 'overlay', xaxis: { title: { text: 'time since job start (s)' } },
        yaxis: { visible: false } };
      const tr2 = [
        { type: 'bar', name: 'fastest rank', x: label, y: Array.from(C.fastest_time), marker: { color: '#7fb3d5' }, text: hover, hoverinfo: 'text', textposition: 'none' },
        { type: 'bar', name: 'median rank', x: label, y: Array.from(C.median_time), marker: { color: '#2456a6' }, text: hover, hoverinfo: 'text', textposition: 'none' },
        { type: 'bar', name: 'slowest rank', x: label, y: Array.from(C.slowest_time), marker: { color: strag.map((s) => s ? '#e8710a' : '#9aa5b1') }, text: hover, hoverinfo: 'text', textposition: 'none' },
      ];
      const lay2 = { height: 260, barmode: 'group', yaxis: { title: { text: 'seconds' } } };
      if (!d1) {
        d1 = newPlot(plots, tr1, lay1, { title: 'Phases on the time axis' });
        d2 = newPlot(plots, tr2, lay2, { title: 'I/O time of the fastest, median and slowest rank per phase' });
      } else { redraw(d1, tr1, lay1); redraw(d2, tr2, lay2); }
      const rows = idx.map((i, j) => ({
        n: i + 1, start: C.start[j], end: C.end[j], duration: C.duration[j], ops: C.ops[j], bytes: C.bytes[j], ranks: C.ranks[j],
        fastest: 'rank ' + C.fastest_rank[j] + ' · ' + fmtSec(C.fastest_time[j]), median: C.median_time[j],
        slowest: 'rank ' + C.slowest_rank[j] + ' · ' + fmtSec(C.slowest_time[j]), ratio: o.ratio[j],
        _class: strag[j] ? 'straggler' : null, _cell: strag[j] ? { slowest: 'slow' } : null,
      }));
      const t = table([
        { key: 'n', label: 'phase' }, { key: 'start', label: 'start (s)', fmt: (v) => v.toFixed(4) }, { key: 'end', label: 'end (s)', fmt: (v) => v.toFixed(4) },
        { key: 'duration', label: 'duration', fmt: fmtSec }, { key: 'ops', label: 'ops', fmt: fmtInt }, { key: 'bytes', label: 'bytes', fmt: fmtBytes },
        { key: 'ranks', label: 'ranks', fmt: fmtInt }, { key: 'fastest', label: 'fastest rank' }, { key: 'median', label: 'median rank', fmt: fmtSec },
        { key: 'slowest', label: 'slowest rank' }, { key: 'ratio', label: 'slowest / median', fmt: (v) => v > 1e299 ? '∞' : v.toPrecision(3) },
      ], rows, { scroll: true, sortable: true });
      t.querySelector('table').id = 'phase-table';
      tableBox.replaceChildren(h('h3', { text: 'Phases (straggler phases highlighted)' }), t);
    }
    refresh();
  }

  // ------------------------------------------------------ file system etc --

  function drawFs(sec) {
    if (D.ost) drawOst(sec);
    drawFileTable(sec);
    drawRanks(sec);
  }

  function drawOst(sec) {
    const O = D.ost;
    const c = card('Lustre: bytes and requests per OST');
    sec.append(c);
    const controls = h('div', { class: 'controls' });
    const msg = note('');
    const g = h('div', { class: 'grid2' });
    c.append(controls, msg, g);
    const fset = Array.from(new Set(Array.from(O.file))).sort((a, b) => a - b);
    let d1 = null;
    let d2 = null;
    let d3 = null;
    const draw = (v) => {
      const want = Number(v);
      const per = new Map();
      for (let j = 0; j < O.ost.length; j++) {
        if (want !== -2 && O.file[j] !== want) continue;
        const k = O.ost[j];
        const e = per.get(k) || { rb: 0, wb: 0, rr: 0, wr: 0, rt: 0, wt: 0, est: 0 };
        e.rb += O.rb[j]; e.wb += O.wb[j]; e.rr += O.rr[j]; e.wr += O.wr[j]; e.rt += O.rt[j]; e.wt += O.wt[j];
        if (!O.exact[j]) e.est += O.rb[j] + O.wb[j];
        per.set(k, e);
      }
      const keys = Array.from(per.keys()).sort((a, b) => a - b);
      const x = keys.map((k) => 'OST ' + k);
      const E = keys.map((k) => per.get(k));
      const hov = E.map((e, j) => x[j] + '<br>read ' + bytesExact(e.rb) + ' · written ' + bytesExact(e.wb) +
        '<br>read requests ' + fmtNum(Math.round(e.rr * 100) / 100) + ' · write requests ' + fmtNum(Math.round(e.wr * 100) / 100) +
        '<br>read time ' + fmtSec(e.rt) + ' · write time ' + fmtSec(e.wt) +
        (e.est > 0 ? '<br>' + fmtPct(e.est / Math.max(e.rb + e.wb, 1)) + ' of the bytes estimated from counters' : ''));
      const bu = byteUnit(maxOf(E.map((e) => e.rb + e.wb)));
      const t1 = [
        { type: 'bar', name: 'read', x: x, y: E.map((e) => e.rb / bu.div), marker: { color: COL.read }, text: hov, hoverinfo: 'text', textposition: 'none' },
        { type: 'bar', name: 'written', x: x, y: E.map((e) => e.wb / bu.div), marker: { color: COL.write }, text: hov, hoverinfo: 'text', textposition: 'none' },
      ];
      const t2 = [
        { type: 'bar', name: 'read requests', x: x, y: E.map((e) => e.rr), marker: { color: COL.read }, text: hov, hoverinfo: 'text', textposition: 'none' },
        { type: 'bar', name: 'write requests', x: x, y: E.map((e) => e.wr), marker: { color: COL.write }, text: hov, hoverinfo: 'text', textposition: 'none' },
      ];
      const t3 = [
        { type: 'bar', name: 'read time', x: x, y: E.map((e) => e.rt), marker: { color: COL.read }, text: hov, hoverinfo: 'text', textposition: 'none' },
        { type: 'bar', name: 'write time', x: x, y: E.map((e) => e.wt), marker: { color: COL.write }, text: hov, hoverinfo: 'text', textposition: 'none' },
      ];
      const l1 = { barmode: 'stack', height: 340, yaxis: { title: { text: bu.unit } }, xaxis: { type: 'category' } };
      const l2 = { barmode: 'stack', height: 340, yaxis: { title: { text: 'requests' } }, xaxis: { type: 'category' } };
      const l3 = { barmode: 'stack', height: 340, yaxis: { title: { text: 'seconds (summed over requests)' } }, xaxis: { type: 'category' } };
      if (!d1) {
        d1 = newPlot(g, t1, l1, { title: 'Bytes per OST' });
        d2 = newPlot(g, t2, l2, { title: 'Requests per OST' });
        d3 = newPlot(g, t3, l3, { title: 'Time per OST' });
      } else { redraw(d1, t1, l1); redraw(d2, t2, l2); redraw(d3, t3, l3); }
    };
    msg.textContent = O.lustre_files + ' file(s) on Lustre; ' + O.how + '.';
    const opts = [{ value: '-2', label: 'all Lustre files (' + fset.length + ')' }].concat(fset.map((f) => ({ value: String(f), label: shortName(fileName(f), 90) })));
    controls.append(select('file', opts, draw).el);
    draw('-2');
  }

  function drawFileTable(sec) {
    const T = D.file_table;
    const c = card('Files');
    sec.append(c);
    if (!T.rows.length) { c.append(note('No per-file data.')); return; }
    const cols = [
      { key: 'name', label: 'file', text: true, fmt: (v) => shortName(v, 100) }, { key: 'layer', label: 'interface', text: true, fmt: (v) => LAB[v] || v },
      { key: 'ranks', label: 'ranks', fmt: (v, r) => r.shared ? 'shared' + (v ? ' + ' + v : '') : fmtInt(v) },
      { key: 'reads', label: 'reads', fmt: fmtInt }, { key: 'writes', label: 'writes', fmt: fmtInt },
      { key: 'bytes_read', label: 'read', fmt: fmtBytes }, { key: 'bytes_written', label: 'written', fmt: fmtBytes },
      { key: 'read_time', label: 'read time', fmt: fmtSec }, { key: 'write_time', label: 'write time', fmt: fmtSec },
      { key: 'meta_time', label: 'meta time', fmt: fmtSec },
    ];
    const rows = T.rows.slice();
    if (T.others) rows.push(Object.assign({ name: 'other rows (' + fmtInt(T.others.rows) + ')', layer: '', ranks: null, shared: false, _class: 'total' }, T.others));
    T.totals.forEach((t) => rows.push(Object.assign({ name: 'total, ' + fmtInt(t.files) + ' file(s)', ranks: null, shared: false, _class: 'total' }, t)));
    c.append(note('One row per file and interface, the ' + fmtInt(T.rows.length) + ' that moved the most bytes' + (T.others ? ' (the rest summed below)' : '') +
      '. "shared" marks files Darshan reduced over all ranks (rank -1). Times are summed over ranks. Click a column to sort.'),
    table(cols, rows, { scroll: true, sortable: true }));
    drawSetAside(c);
  }

  // Runtime and library files the checks did not see (report.set_aside).
  function drawSetAside(c) {
    const A = R.set_aside;
    if (!A || !A.files) return;
    const why = A.reasons.map((r) => r.reason + ' ' + fmtInt(r.files)).join(', ');
    const cols = [
      { key: 'path', label: 'file', text: true, fmt: (v) => shortName(v, 100) }, { key: 'reason', label: 'why', text: true },
      { key: 'bytes_read', label: 'read', fmt: fmtBytes }, { key: 'bytes_written', label: 'written', fmt: fmtBytes },
      { key: 'operations', label: 'operations', fmt: fmtInt }, { key: 'seconds', label: 'time', fmt: fmtSec },
    ];
    c.append(h('details', { id: 'set-aside' }, h('summary', { text: 'Runtime and library files set aside: ' + fmtInt(A.files) + ' file(s), ' +
      fmtBytes(A.bytes_read) + ' read, ' + fmtBytes(A.bytes_written) + ' written, ' + fmtInt(A.operations) + ' operations, ' + fmtSec(A.seconds) + ' (' + why + ')' }),
    note('The checks and the table above leave these out' + (A.scope.defaults ? ' (iopilot report --no-default-excludes keeps them)' : '') +
      '; the ' + fmtInt(A.listed.length) + ' that moved the most bytes are listed.'),
    table(cols, A.listed, { scroll: A.listed.length > 10, sortable: true })));
  }

  function drawRanks(sec) {
    const K = D.ranks;
    const cl = Object.keys(K.counters);
    const rl = Object.keys(K.records);
    const c = card('Per rank');
    sec.append(c);
    if (!cl.length && !rl.length) { c.append(note('No per-rank data.')); return; }
    const controls = h('div', { class: 'controls' });
    const msg = note('');
    const g = h('div', { class: 'grid2' });
    c.append(controls, msg, g);
    // Counters first, the interface with the most per-rank bytes first: layers whose
    // files were all reduced to rank -1 have nothing to show per rank.
    const owned = (l) => K.counters[l].owned_bytes + maxOf(K.counters[l].ops);
    const choices = cl.slice().sort((a, b) => owned(b) - owned(a)).map((l) => ({ value: 'c:' + l, label: LAB[l] + ' (counters)' }))
      .concat(rl.map((l) => ({ value: 'r:' + l, label: LAB[l] + ' (traced operations)' })));
    let d1 = null;
    let d2 = null;
    const draw = (v) => {
      const src = v.slice(0, 1);
      const L = v.slice(2);
      const A = src === 'c' ? K.counters[L] : K.records[L];
      const n = A.rb.length;
      const x = new Array(n);
      for (let i = 0; i < n; i++) x[i] = i * K.per_bar;
      const xl = K.per_bar > 1 ? 'rank (bars of ' + K.per_bar + ' ranks)' : 'rank';
      const bu = byteUnit(maxOf(A.rb, A.wb));
      const who = (i) => K.per_bar > 1 ? 'ranks ' + x[i] + '–' + Math.min(x[i] + K.per_bar - 1, K.n - 1) : 'rank ' + x[i];
      const t1 = [['rb', 'read', COL.read], ['wb', 'written', COL.write]].map(([k, name, color]) => ({
        type: 'bar', name: name, x: x, y: scaled(A[k], bu.div), marker: { color: color }, hoverinfo: 'text', textposition: 'none',
        text: Array.from(A[k], (v, i) => who(i) + ': ' + bytesExact(v) + ' ' + name) }));
      const t2 = [
        { type: 'bar', name: src === 'c' ? 'read' : 'read (busy)', x: x, y: A.rt, marker: { color: COL.read }, hovertemplate: 'rank %{x}: %{y:.4g} s<extra>read</extra>' },
        { type: 'bar', name: src === 'c' ? 'write' : 'write (busy)', x: x, y: A.wt, marker: { color: COL.write }, hovertemplate: 'rank %{x}: %{y:.4g} s<extra>write</extra>' },
      ];
      if (src === 'c') t2.push({ type: 'bar', name: 'metadata', x: x, y: A.mt, marker: { color: COL.meta }, hovertemplate: 'rank %{x}: %{y:.4g} s<extra>metadata</extra>' });
      const base = { barmode: 'stack', height: 330, bargap: n > 200 ? 0 : 0.15, xaxis: { title: { text: xl } } };
      const l1 = Object.assign({ yaxis: { title: { text: bu.unit } } }, base);
      const l2 = Object.assign({ yaxis: { title: { text: 'seconds' } } }, base);
      if (!d1) { d1 = newPlot(g, t1, l1, { title: 'Bytes per rank' }); d2 = newPlot(g, t2, l2, { title: 'Time per rank' }); } else { redraw(d1, t1, l1); redraw(d2, t2, l2); }
      if (src === 'c') {
        msg.textContent = LAB[L] + ' counters, rows of single ranks.' + (A.shared_files
          ? ' ' + fmtInt(A.shared_files) + ' shared file(s) were reduced by Darshan to one record over all ranks (rank -1): their ' +
            fmtBytes(A.shared_bytes) + ', ' + fmtInt(A.shared_ops) + ' operations and ' + fmtSec(A.shared_time) +
            ' cannot be split per rank and are not in these bars (' + fmtPct(A.shared_bytes / Math.max(A.shared_bytes + A.owned_bytes, 1)) + ' of the bytes).'
          : ' Every row belongs to one rank: the bars hold all of this interface\'s I/O.');
      } else {
        msg.textContent = LAB[L] + ': every traced operation; time is the sum of operation durations.';
      }
    };
    controls.append(select('data', choices, draw).el);
    draw(choices[0].value);
  }

  // ---------------------------------------------------------------- shell --

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
    app.append(top, main);
    if (R.warnings.length) {
      main.append(h('div', { class: 'banner warn', id: 'data-warnings' }, h('strong', { text: 'Data warnings — some figures are incomplete' }),
        h('ul', null, R.warnings.map((w) => h('li', { text: w })))));
    }
    if (D.notes.length) main.append(h('div', { class: 'banner note' }, h('ul', null, D.notes.map((w) => h('li', { text: w })))));
    const missing = VIEWS.filter((v) => !v.ok).map((v) => v.title);
    if (missing.length) main.append(h('p', { class: 'note', text: 'Not available for this source (no per-operation trace): ' + missing.join(', ') + '.' }));
    const sections = {};
    VIEWS.filter((v) => v.ok).forEach((v) => {
      const s = h('section', { class: 'view', id: 'view-' + v.id, 'data-view': v.id });
      sections[v.id] = s;
      main.append(s);
      nav.append(h('button', { type: 'button', id: 'tab-' + v.id, 'data-view': v.id, text: v.title, onclick: () => show(v.id) }));
    });

    function show(id, finding) {
      if (!sections[id]) id = 'summary';
      const want = '#view=' + id + (finding !== undefined ? '&finding=' + finding : '');
      if (location.hash !== want) history.replaceState(null, '', want);
      nav.querySelectorAll('button').forEach((b) => b.classList.toggle('active', b.dataset.view === id));
      Object.entries(sections).forEach(([k, s]) => s.classList.toggle('active', k === id));
      const s = sections[id];
      const v = VIEWS.find((x) => x.id === id);
      if (!s.dataset.drawn) {
        try {
          v.draw(s);
        } catch (e) {
          s.append(h('div', { class: 'banner error', text: 'This view failed to draw: ' + e }));
          throw e;
        } finally {
          s.dataset.drawn = '1';
          s.dataset.plots = String(s.querySelectorAll('.plot').length);
        }
      } else {
        s.querySelectorAll('.js-plotly-plot').forEach((p) => Plotly.Plots.resize(p));
      }
    }
    function follow() {
      const st = hashState();
      show(st.view || 'summary', st.finding);
      const f = st.finding !== undefined ? document.getElementById('finding-' + st.finding) : null;
      document.querySelectorAll('.finding.linked').forEach((e) => e.classList.remove('linked'));
      if (f) f.classList.add('linked');
    }
    window.addEventListener('hashchange', follow);
    follow();
  }

  build();
})();
