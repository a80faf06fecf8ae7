/* iopilot HTML report, view "heatmap": Heatmap: bytes per rank and time bin, from Darshan's HEATMAP module.
 * Registered in iopilot/report/views/__init__.py; its data is D.views.heatmap.
 */
(function () {
  'use strict';

  const { h, fmtBytes, fmtInt, select, newPlot, redraw, card, note, inTime, inRanks, timeRange,
    onFilter, filterNote, FILTER } = IOP.ui;
  let V = null; // this view's data, set by draw

  function drawHeatmap(sec) {
    const HM = V;
    const L = HM.layers;
    const ctl = h('div', { class: 'controls' });
    const holder = h('div');
    const info = h('div');
    const card0 = card('I/O over time and ranks (Darshan HEATMAP)', ctl,
      filterNote('The heatmap', ['time', 'ranks']), holder, info);
    sec.append(card0);
    const state = { layer: 0, what: 'both' };
    let div = null;
    const layerSel = select('layer ', L.map((x, i) => ({ value: String(i), label: x.label })),
      (v) => { state.layer = +v; draw(); }, '0', 'heatmap-layer');
    const whatSel = select(' bytes ', [{ value: 'both', label: 'read + written' },
      { value: 'read', label: 'read' }, { value: 'write', label: 'written' }],
    (v) => { state.what = v; draw(); }, 'both', 'heatmap-metric');
    ctl.append(layerSel.el, whatSel.el);

    function grid(x) {
      const n = HM.rows * x.bins;
      const out = new Float64Array(n);
      ['read', 'write'].forEach((k) => {
        if ((state.what === 'both' || state.what === k) && x[k]) {
          const g = x[k];
          for (let i = 0; i < n; i++) out[i] += g[i];
        }
      });
      return out;
    }

    function draw() {
      const x = L[state.layer];
      const width = (+x.bin_seconds.toPrecision(6)) + ' s'; // 6.4 s, not 6.400 s
      const g = grid(x);
      const z = [];
      const text = [];
      let total = 0;
      for (let r = 0; r < HM.rows; r++) {
        const zr = new Array(x.bins);
        const tr = new Array(x.bins);
        const r0 = r * HM.per_row;
        const who = HM.per_row > 1 ? 'ranks ' + r0 + '–' + (Math.min(r0 + HM.per_row, HM.nranks) - 1) : 'rank ' + r0;
        const rowIn = inRanks(r0, r0 + HM.per_row - 1);
        for (let b = 0; b < x.bins; b++) {
          // Outside the filter's window or ranks: an empty cell, not counted.
          const v = rowIn && inTime(b * x.bin_seconds, (b + 1) * x.bin_seconds) ? g[r * x.bins + b] : 0;
          total += v;
          // Colour on a log scale: a few busy bins must not hide the rest.
          zr[b] = v > 0 ? Math.log10(v) : null;
          tr[b] = who + '<br>' + (b * x.bin_seconds).toFixed(2) + '–' + ((b + 1) * x.bin_seconds).toFixed(2) +
            ' s<br>' + fmtBytes(v);
        }
        z.push(zr);
        text.push(tr);
      }
      // Colour-bar ticks at powers of 4 bytes (1 B, 4 B ... 1 KiB, 4 KiB ...);
      // a narrow range with none inside is labelled at its two ends.
      let lo = Infinity;
      let hi = -Infinity;
      z.forEach((row) => row.forEach((v) => { if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); } }));
      let tickvals = [];
      for (let p = 0; p <= 60; p += 2) {
        const v = p * Math.log10(2);
        if (v >= lo - 1e-9 && v <= hi + 1e-9) tickvals.push(v);
      }
      if (tickvals.length < 2 && hi >= lo) tickvals = hi > lo ? [lo, hi] : [lo];
      const trace = { type: 'heatmap', z: z, text: text, hoverinfo: 'text', x0: x.bin_seconds / 2, dx: x.bin_seconds,
        y0: (HM.per_row - 1) / 2, dy: HM.per_row, colorscale: 'Viridis', hoverongaps: false,
        colorbar: { title: { text: 'bytes per bin' }, tickvals: tickvals,
          ticktext: tickvals.map((v) => fmtBytes(Math.round(Math.pow(10, v))).replace('.00 ', ' ')) } };
      const lay = { height: Math.max(320, Math.min(720, 200 + 2 * HM.rows)),
        xaxis: { title: { text: 'seconds since the job start (bins of ' + width + ')' }, range: timeRange() || [0, x.bins * x.bin_seconds] },
        yaxis: { title: { text: HM.per_row > 1 ? 'rank (' + HM.per_row + ' per row)' : 'rank' },
          range: [(FILTER.r0 === null ? 0 : FILTER.r0) - 0.5, (FILTER.r1 === null ? HM.nranks - 1 : FILTER.r1) + 0.5] } };
      if (div) redraw(div, [trace], lay);
      else div = newPlot(holder, [trace], lay);
      info.replaceChildren(note(x.label + ': ' + fmtBytes(x.bytes_read) + ' read and ' + fmtBytes(x.bytes_written) +
        ' written by ' + fmtInt(x.ranks) + ' rank(s); ' + fmtBytes(total) + ' drawn' +
        (total < x.bytes_read + x.bytes_written ? ' (in the filter)' : '') + '. ' +
        'The data come from Darshan\'s HEATMAP module, in bins of ' + width + ': it adds each operation\'s bytes to the bins ' +
        'its duration covers, so a bin shows when bytes moved, not how they were requested' +
        (HM.per_row > 1 ? '; each row sums ' + HM.per_row + ' consecutive ranks.' : '.')));
    }
    draw();
    onFilter(draw);
  }

  IOP.views.heatmap = {
    draw(sec, data) {
      V = data;
      drawHeatmap(sec);
    },
  };
})();
