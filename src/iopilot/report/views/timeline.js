/* iopilot HTML report, view "timeline": Timeline: operations, or exact (rank × time) bins, per rank over time.
 * Registered in iopilot/report/views/__init__.py; its data is D.views.timeline.
 */
(function () {
  'use strict';

  const { D, REC, LAB, LAYER_CODE, COL, h, fmtInt, fmtSec, fileName, shortName, bytesExact,
    select, newPlot, redraw, card, note, recordText, segments, sampleIndex, layersPresent,
    rankAxis, laneWidth, filesWithRecords, FILTER, filterActive, ranksActive, inRanks, inFilter,
    filterText, timeRange, onFilter, setFilter, siteActive } = IOP.ui;
  let V = null; // this view's data, set by draw


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

  // The grid to draw for layer L: the finer level when the time window holds
  // too few of the base level's bins to show detail (see docs/html-report.md).
  function gridFor(L) {
    const B = REC.bins[L];
    const tr = timeRange();
    if (!tr || !B.finer) return B;
    return (tr[1] - tr[0]) / B.width < FINE_BELOW ? B.finer : B;
  }
  const FINE_BELOW = 400; // base bins in the window under which the finer level is drawn

  function heatTrace(L, B, metric, yaxis, showscale, cbY) {
    const rows = B.rows;
    const cols = B.cols;
    // Only the bins that overlap the window and the rank rows in the range.
    const tr = timeRange();
    const c0 = tr ? Math.max(0, Math.floor((tr[0] - B.t0) / B.width)) : 0;
    const c1 = tr ? Math.min(cols - 1, Math.ceil((tr[1] - B.t0) / B.width) - 1) : cols - 1;
    let q0 = 0;
    let q1 = rows - 1;
    while (q0 < rows && !inRanks(q0 * B.per_row, q0 * B.per_row + B.per_row - 1)) q0++;
    while (q1 >= q0 && !inRanks(q1 * B.per_row, q1 * B.per_row + B.per_row - 1)) q1--;
    const nc = Math.max(0, c1 - c0 + 1);
    const nr = Math.max(0, q1 - q0 + 1);
    const z = [];
    const text = [];
    for (let r = 0; r < nr; r++) { z.push(new Array(nc).fill(null)); text.push(new Array(nc).fill('')); }
    for (let j = 0; j < B.idx.length; j++) {
      const c = B.idx[j];
      const r = Math.floor(c / cols);
      const col = c - r * cols;
      if (r < q0 || r > q1 || col < c0 || col > c1) continue;
      const v = { busy: B.rt[j] + B.wt[j], read: B.rt[j], write: B.wt[j], bytes: B.rb[j] + B.wb[j], ops: B.rn[j] + B.wn[j] }[metric];
      if (metric === 'read' && B.rn[j] === 0 && B.rt[j] === 0) continue;
      if (metric === 'write' && B.wn[j] === 0 && B.wt[j] === 0) continue;
      z[r - q0][col - c0] = v;
      const r0 = r * B.per_row;
      const who = B.per_row > 1 ? 'ranks ' + r0 + '–' + (Math.min(r0 + B.per_row, D.nranks) - 1) : 'rank ' + r0;
      const t0 = B.t0 + col * B.width;
      text[r - q0][col - c0] = who + ' · ' + LAB[L] +
        '<br>' + t0.toFixed(6) + '–' + (t0 + B.width).toFixed(6) + ' s' +
        '<br>reads started: ' + fmtInt(B.rn[j]) + ' · ' + bytesExact(B.rb[j]) +
        '<br>writes started: ' + fmtInt(B.wn[j]) + ' · ' + bytesExact(B.wb[j]) +
        '<br>busy (operation-seconds in bin): read ' + fmtSec(B.rt[j]) + ', write ' + fmtSec(B.wt[j]);
    }
    const x = new Array(nc);
    for (let c = 0; c < nc; c++) x[c] = B.t0 + (c0 + c + 0.5) * B.width;
    const y = new Array(nr);
    for (let r = 0; r < nr; r++) y[r] = (q0 + r) * B.per_row + (B.per_row - 1) / 2;
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
        const useBins = state.mode === 'bins' && REC.bins[L] && file === -2 && !siteActive();
        if (useBins) {
          const B = gridFor(L);
          traces.push(heatTrace(L, B, state.metric, yaxis, true, 1 - (k + 0.5) / panels.length));
          parts.push(LAB[L] + ': all ' + fmtInt(B.records) + ' operations in ' + B.rows + ' rank row(s)' +
            (B.per_row > 1 ? ' of ' + B.per_row + ' ranks' : '') + ' × ' + B.cols + ' time bins of ' + fmtSec(B.width) +
            (B !== REC.bins[L] ? ' (the finer level, for the zoomed window)' : ''));
          binsShown = true;
          return;
        }
        for (const op of [0, 1]) {
          const idx = sampleIndex((i) => S.layer[i] === code && S.op[i] === op && (file === -2 || S.file[i] === file) && inFilter(i));
          traces.push(segments(idx, (i) => [S.start[i], S.rank[i], S.start[i] + S.dur[i], S.rank[i]],
            op ? COL.write : COL.read, LAB[L] + (op ? ' writes' : ' reads'), yaxis, width, recordText));
        }
        const drawn = REC.drawn_per_layer[code];
        opsShown = true;
        parts.push(LAB[L] + ': ' + (drawn < total ? 'a sample of ' + fmtInt(drawn) + ' of ' + fmtInt(total) + ' operations' : 'all ' + fmtInt(total) + ' operations') +
          (file === -2 ? '' : ', those on the chosen file'));
      });
      if (state.mode === 'bins' && binned.length && file !== -2) parts.push('bins cover all files: choosing a file shows sampled operations');
      else if (state.mode === 'bins' && binned.length && siteActive()) parts.push('bins cover all call sites: with a call site chosen, sampled operations are drawn');
      if (binsShown) parts.push('In a bin, operations and bytes count where an operation starts; busy time is the exact overlap of operations with the bin (hover for the sums)');
      if (opsShown) parts.push('Each operation is a stroke from its start to its end: reads blue, writes red');
      if (filterActive()) parts.push('Only what lies in the filter (' + filterText() + ') is drawn');
      msg.textContent = parts.join('. ') + '. Drag to zoom (it sets the time window), double-click to reset.';
      const per = Math.min(720, Math.max(240, 90 + 5 * Math.min(lanes, 140)));
      const lay = Object.assign(panelAxes(panels), { height: per * panels.length + 60, showlegend: true });
      panels.forEach((p, k) => Object.assign(lay[k === 0 ? 'yaxis' : 'yaxis' + (k + 1)], rankAxis()));
      const tr = timeRange();
      if (tr) lay.xaxis.range = tr;
      if (ranksActive()) {
        const rr = [(FILTER.r0 === null ? 0 : FILTER.r0) - 0.5, (FILTER.r1 === null ? D.nranks - 1 : FILTER.r1) + 0.5];
        panels.forEach((p, k) => { lay[k === 0 ? 'yaxis' : 'yaxis' + (k + 1)].range = rr; });
      }
      if (!div) {
        div = newPlot(holder, traces, lay, { ops: true });
        // Zooming the time axis sets the window every view shares; a reset clears it.
        div.on('plotly_relayout', (ev) => {
          if (ev['xaxis.autorange']) setFilter({ t0: null, t1: null }, 'timeline');
          else if (ev['xaxis.range[0]'] !== undefined) {
            const round = (v) => Number(Number(v).toPrecision(9));
            setFilter({ t0: round(ev['xaxis.range[0]']), t1: round(ev['xaxis.range[1]']) }, 'timeline');
          }
        });
      } else redraw(div, traces, lay);
    }
    draw();
    onFilter(draw);
  }

  IOP.views.timeline = {
    draw(sec, data) {
      V = data;
      drawTimeline(sec);
    },
  };
})();
