/* iopilot HTML report, view "background": write-behind's thread per rank.
 * Registered in iopilot/report/views/__init__.py; its data is D.views.background.
 */
(function () {
  'use strict';

  const { D, R, h, fmtInt, fmtSec, fmtPct, fileName, shortName, bytesExact, escapeHtml, newPlot,
    redraw, card, note, table, segments, rankAxis, laneWidth, timeRange, onFilter, ranksActive, FILTER } = IOP.ui;
  const WAIT = '#c7c7c7'; // queued, not yet issued
  const RUN = '#ff7f0e'; // the thread's write or sync
  const CALL = '#2f2f2f'; // the program's own I/O calls

  function opText(V, i) {
    const O = V.ops;
    const op = D.op_names[O.op[i]];
    let t = 'rank ' + O.rank[i] + ' · background ' + op + (O.failed[i] ? ' (failed)' : '');
    if (op === 'write') t += '<br>offset ' + fmtInt(O.offset[i]) + ' · size ' + bytesExact(O.length[i]);
    t += '<br>queued ' + O.queued[i].toFixed(6) + ' s, waited ' + fmtSec(O.issued[i] - O.queued[i]) +
      '<br>issued ' + O.issued[i].toFixed(6) + ' s, ran ' + fmtSec(O.completed[i] - O.issued[i]) +
      '<br>file ' + escapeHtml(shortName(fileName(O.file[i]), 90));
    return t;
  }

  function draw(sec, V) {
    const S = R.background_io;
    const c = card('Background I/O');
    sec.append(c);
    if (S) {
      c.append(note(fmtInt(S.operations) + ' operations (' + fmtInt(S.writes) + ' writes, ' +
        bytesExact(S.bytes) + '; ' + fmtInt(S.syncs) + ' syncs) made by background threads in ' +
        fmtSec(S.busy_seconds) + '. Overlap achieved: ' + fmtSec(S.hidden_seconds) + ' (' +
        fmtPct(S.overlap_share) + ') of that ran while the program was not in an I/O call; ' +
        fmtSec(S.exposed_seconds) + ' ran while it was (waiting at a sync, close or read, or in other I/O). ' +
        'Median wait in the queue ' + fmtSec(S.queue_delay.p50) + ', longest ' + fmtSec(S.queue_delay.max) + '.' +
        (S.failed ? ' ' + fmtInt(S.failed) + ' operations failed: the program was told at its next sync or close.' : '')));
    }
    const O = V.ops;
    const C = V.calls;
    const n = O.rank.length;
    const idx = [...Array(n).keys()];
    const width = laneWidth(D.nranks * 2);
    const traces = [
      segments(idx, (i) => [O.queued[i], O.rank[i] + 0.18, O.issued[i], O.rank[i] + 0.18], WAIT,
        'queued, waiting for the thread', 'y', width, (i) => opText(V, i)),
      segments(idx, (i) => [O.issued[i], O.rank[i] + 0.18, O.completed[i], O.rank[i] + 0.18], RUN,
        'issued by the thread, running', 'y', width, (i) => opText(V, i)),
      segments([...Array(C.rank.length).keys()], (i) => [C.start[i], C.rank[i] - 0.18, C.end[i], C.rank[i] - 0.18],
        CALL, "the program's I/O calls", 'y', width,
        (i) => 'rank ' + C.rank[i] + ' · ' + D.op_names[C.op[i]] + ' call<br>' + C.start[i].toFixed(6) +
          ' s, ' + fmtSec(C.end[i] - C.start[i])),
    ];
    const parts = [];
    parts.push(V.drawn < V.n ? 'The ' + fmtInt(V.drawn) + ' longest of ' + fmtInt(V.n) + ' background operations are drawn'
      : 'All ' + fmtInt(V.n) + ' background operations are drawn');
    if (C.rank.length < V.calls_total) parts.push('So are the ' + fmtInt(C.rank.length) + ' longest of ' + fmtInt(V.calls_total) + ' program calls');
    parts.push('Above each rank: the thread (grey while queued, orange while running); below it: the program\'s own I/O calls. ' +
      'Orange under a black stroke is I/O the program waited for');
    c.append(note(parts.join('. ') + '.'));
    const holder = h('div');
    c.append(holder);
    const lay = { height: Math.min(720, Math.max(260, 120 + 40 * D.nranks)), showlegend: true,
      xaxis: { title: { text: 'time since job start (s)' } },
      yaxis: Object.assign({ title: { text: 'rank' } }, rankAxis()) };
    let div = null;
    const plot = () => {
      const tr = timeRange();
      lay.xaxis.range = tr || undefined;
      lay.yaxis.range = ranksActive()
        ? [(FILTER.r0 === null ? 0 : FILTER.r0) - 0.5, (FILTER.r1 === null ? D.nranks - 1 : FILTER.r1) + 0.5]
        : rankAxis().range;
      if (!div) div = newPlot(holder, traces, lay, { ops: true });
      else redraw(div, traces, lay);
    };
    plot();
    onFilter(plot);
    const K = V.ranks;
    const rows = [];
    for (let i = 0; i < K.rank.length; i++) {
      rows.push({ rank: K.rank[i], busy: K.busy[i], hidden: K.hidden[i], exposed: K.busy[i] - K.hidden[i],
        share: K.busy[i] > 0 ? K.hidden[i] / K.busy[i] : 0 });
    }
    rows.sort((a, b) => b.exposed - a.exposed);
    c.append(h('h3', { text: 'Per rank, least hidden first' }),
      table([{ key: 'rank', label: 'rank' }, { key: 'busy', label: 'thread busy', fmt: fmtSec },
        { key: 'hidden', label: 'hidden behind the program', fmt: fmtSec },
        { key: 'exposed', label: 'while the program was in I/O', fmt: fmtSec },
        { key: 'share', label: 'overlap achieved', fmt: fmtPct }], rows.slice(0, 200),
      { scroll: rows.length > 10, sortable: true }));
  }

  IOP.views.background = {
    draw(sec, data) { draw(sec, data); },
  };
})();
