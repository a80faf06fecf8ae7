/* iopilot HTML report, view "sizes": Request sizes: Darshan's size bins per interface.
 * Registered in iopilot/report/views/__init__.py; its data is D.views.sizes.
 */
(function () {
  'use strict';

  const { D, REC, LAB, LAYER_CODE, COL, SIZE_COL, SIZE_LABEL, SIZE_UPPER, h, fmtInt, select,
    newPlot, redraw, card, note, recordText, segments, sampleIndex, layersPresent, rankAxis,
    laneWidth } = IOP.ui;
  let V = null; // this view's data, set by draw

  function drawSizes(sec) {
    const layers = Object.keys(V);
    const c = card('Request sizes (Darshan\'s size bins)');
    sec.append(c);
    if (layers.length) {
      const controls = h('div', { class: 'controls' });
      const msg = note('');
      const holder = h('div');
      c.append(controls, msg, holder);
      let div = null;
      const draw = (L) => {
        const s = V[L];
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

  IOP.views.sizes = {
    draw(sec, data) {
      V = data;
      drawSizes(sec);
    },
  };
})();
