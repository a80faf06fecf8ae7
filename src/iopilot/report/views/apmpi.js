/* iopilot HTML report, view "apmpi": MPI time: time in MPI per rank and the costliest operations, from AutoPerf's APMPI module.
 * Registered in iopilot/report/views/__init__.py; its data is D.views.apmpi.
 */
(function () {
  'use strict';

  const { COL, h, fmtBytes, fmtInt, fmtSec, fmtPct, newPlot, redraw, card, note, table, inRanks,
    onFilter, filterNote } = IOP.ui;
  let V = null; // this view's data, set by draw

  function drawMpi(sec) {
    const M = V;
    const S = M.summary;
    const x = [];
    for (let i = 0; i < M.bars; i++) x.push(i * M.per_bar);
    const PAL = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2'];
    const who = (i) => M.per_bar > 1 ? 'ranks ' + x[i] + '–' + (x[i] + M.per_bar - 1) : 'rank ' + x[i];
    // The bars of the filter's rank range only.
    let keep = [];
    const bar = (name, y, color) => ({ type: 'bar', name: name, x: keep.map((i) => x[i]), y: keep.map((i) => y[i]),
      marker: { color: color }, text: keep.map((i) => who(i) + ': ' + fmtSec(y[i]) + ' in ' + name),
      hoverinfo: 'text', textposition: 'none' });
    const traces = () => {
      keep = x.map((r, i) => i).filter((i) => inRanks(x[i], x[i] + M.per_bar - 1));
      const t = M.stacked.map((o, j) => bar(o.operation, o.seconds, PAL[j % PAL.length]));
      t.push(bar('other MPI calls', M.other, COL.meta));
      if (M.sync) t.push(bar('waiting before collectives (sync)', M.sync, COL.other));
      return t;
    };
    const figs = h('div', { class: 'figures' });
    const fig = (v, l) => figs.append(h('div', { class: 'figure' }, h('div', { class: 'v', text: v }), h('div', { class: 'l', text: l })));
    fig(fmtSec(S.slowest_rank_seconds), 'in MPI on the slowest rank (rank ' + S.slowest_rank + ')');
    fig(fmtSec(S.mean_rank_seconds), 'in MPI on the mean rank');
    fig(S.sync_measured ? fmtSec(S.sync_seconds) : 'not measured', 'waiting before collectives, summed over ranks');
    fig(fmtSec(Math.sqrt(Math.max(S.variance, 0))), 'spread of the time in MPI over ranks (standard deviation)');
    const c = card('Time in MPI per rank (AutoPerf APMPI)', figs,
      filterNote('The per-rank bars', ['ranks']));
    sec.append(c);
    const lay = { barmode: 'stack', bargap: M.bars > 64 ? 0 : 0.2, height: 380,
      xaxis: { title: { text: M.per_bar > 1 ? 'rank (' + M.per_bar + ' per bar)' : 'rank' } },
      yaxis: { title: { text: 'seconds in MPI' } } };
    const div = newPlot(c, traces(), lay);
    onFilter(() => redraw(div, traces(), lay));
    c.append(note('The data come from AutoPerf\'s APMPI module, which times every MPI call of every rank. ' +
      'The ' + M.stacked.length + ' operations with the most time over all ranks are drawn one by one. ' +
      (S.sync_measured ? 'Sync time is the time a rank waited in a barrier the runtime put before each collective: how long it waited for the others.'
        : 'Sync time was not measured (the runtime was built without its collective-sync option), so waiting for other ranks is inside the operations\' own times.')));
    const rows = S.operations.map((o) => Object.assign({}, o, {
      mean: M.mean_rank_seconds[o.operation],
      share: S.seconds > 0 ? o.seconds / S.seconds : null }));
    sec.append(card('MPI operations with the most time',
      table([{ key: 'operation', label: 'operation', text: true }, { key: 'calls', label: 'calls', fmt: fmtInt },
        { key: 'seconds', label: 'seconds (all ranks)', fmt: fmtSec }, { key: 'share', label: '% of MPI time', fmt: fmtPct },
        { key: 'mean', label: 'mean per rank', fmt: fmtSec }, { key: 'slowest_rank_seconds', label: 'most on one rank', fmt: fmtSec },
        { key: 'bytes', label: 'message bytes', fmt: (v) => v ? fmtBytes(v) : '–' }], rows, { id: 'mpi-table', sortable: true }),
      note('Calls and seconds summed over ' + fmtInt(S.ranks) + ' rank(s); ' + fmtSec(S.seconds) + ' in MPI in all.')));
  }

  IOP.views.apmpi = {
    draw(sec, data) {
      V = data;
      drawMpi(sec);
    },
  };
})();
