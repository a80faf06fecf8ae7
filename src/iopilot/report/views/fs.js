/* iopilot HTML report, view "fs": File system, files and ranks: per-OST, per-file and per-rank totals.
 * Registered in iopilot/report/views/__init__.py; its data is D.views.fs.
 */
(function () {
  'use strict';

  const { R, LAB, COL, h, fmtBytes, fmtInt, fmtNum, fmtSec, fmtPct, fileName, shortName,
    bytesExact, select, newPlot, byteUnit, maxOf, scaled, redraw, card, note, table ,
    inRanks, onFilter, filterNote } = IOP.ui;
  let V = null; // this view's data, set by draw

  function drawFs(sec) {
    if (V.ost) drawOst(sec);
    drawFileTable(sec);
    drawRanks(sec);
  }

  function drawOst(sec) {
    const O = V.ost;
    const c = card('Lustre: bytes and requests per OST');
    sec.append(c);
    c.append(filterNote('The per-OST totals', []));
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
    // how many of them were placed from their operations, and how many estimated from counters
    const how = [O.files_exact ? fmtInt(O.files_exact) + ' traced' : '', O.files_estimated ? fmtInt(O.files_estimated) + ' estimated' : ''].filter(Boolean);
    const opts = [{ value: '-2', label: 'all Lustre files (' + fset.length + (how.length ? ': ' + how.join(', ') : '') + ')' }].concat(fset.map((f) => ({ value: String(f), label: shortName(fileName(f), 90) })));
    controls.append(select('file', opts, draw).el);
    draw('-2');
  }

  function drawFileTable(sec) {
    const T = V.file_table;
    const c = card('Files');
    sec.append(c);
    c.append(filterNote('The per-file totals', []));
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
    const K = V.ranks;
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
      const A0 = src === 'c' ? K.counters[L] : K.records[L];
      // Only the bars in the rank range.
      const keep = [];
      for (let i = 0; i < A0.rb.length; i++) if (inRanks(i * K.per_bar, i * K.per_bar + K.per_bar - 1)) keep.push(i);
      const A = Object.assign({}, A0);
      ['rb', 'wb', 'rt', 'wt', 'mt', 'ops', 'rn', 'wn'].forEach((k) => { if (A0[k]) A[k] = keep.map((i) => A0[k][i]); });
      const n = keep.length;
      const x = keep.map((i) => i * K.per_bar);
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
    let cur = choices[0].value;
    controls.append(select('data', choices, (v) => { cur = v; draw(v); }).el);
    c.append(filterNote('The per-rank bars', ['ranks']));
    draw(cur);
    onFilter(() => draw(cur));
  }

  IOP.views.fs = {
    draw(sec, data) {
      V = data;
      drawFs(sec);
    },
  };
})();
