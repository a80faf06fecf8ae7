/* iopilot HTML report, view "spatiality": Spatiality: file offset over time, from the sampled operations.
 * Registered in iopilot/report/views/__init__.py; its data is D.views.spatiality.
 */
(function () {
  'use strict';

  const { D, REC, LAB, LAYER_CODE, COL, h, fmtInt, fileName, shortName, select, newPlot,
    byteUnit, redraw, card, note, recordText, segments, sampleIndex, filesWithRecords } = IOP.ui;
  let V = null; // this view's data, set by draw

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

  IOP.views.spatiality = {
    draw(sec, data) {
      V = data;
      drawSpatiality(sec);
    },
  };
})();
