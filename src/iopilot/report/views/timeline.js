/* iopilot HTML report, view "timeline": Timeline: operations, or exact (rank × time) bins, per rank over time.
 * Registered in iopilot/report/views/__init__.py; its data is D.views.timeline.
 */
(function () {
  'use strict';

  const { D, REC, LAB, LAYER_CODE, COL, h, fmtInt, fmtSec, fileName, shortName, bytesExact,
    select, newPlot, redraw, card, note, recordText, segments, sampleIndex, layersPresent,
    rankAxis, laneWidth, filesWithRecords } = IOP.ui;
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

  IOP.views.timeline = {
    draw(sec, data) {
      V = data;
      drawTimeline(sec);
    },
  };
})();
