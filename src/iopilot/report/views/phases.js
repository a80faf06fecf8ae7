/* iopilot HTML report, view "phases": Phases and stragglers per layer and gap threshold.
 * Registered in iopilot/report/views/__init__.py; its data is D.views.phases.
 */
(function () {
  'use strict';

  const { D, REC, LAB, h, fmtBytes, fmtInt, fmtSec, select, newPlot, redraw, card, note, table } = IOP.ui;
  let V = null; // this view's data, set by draw

  function drawPhases(sec) {
    const P = V;
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

  IOP.views.phases = {
    draw(sec, data) {
      V = data;
      drawPhases(sec);
    },
  };
})();
