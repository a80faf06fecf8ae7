/* iopilot HTML report, view "summary": Summary: the job, key figures, interfaces and the findings.
 * Registered in iopilot/report/views/__init__.py; its data is D.views.summary.
 */
(function () {
  'use strict';

  const { D, R, REC, COL, FS_TEXT, h, fmtBytes, fmtInt, fmtNum, fmtSec, fmtPct, bytesExact,
    newPlot, byteUnit, maxOf, card, note, table, filterNote, SITES, siteText, setFilter, onFilter, FILTER } = IOP.ui;
  let V = null; // this view's data, set by draw

  function drawSummary(sec) {
    const job = R.job;
    const ov = V.overview;
    const start = job.start ? new Date(job.start * 1000).toISOString().replace('T', ' ').slice(0, 19) + ' UTC' : '–';
    const mods = R.modules.map((m) => h('span', null, m.name,
      m.partial ? h('span', { class: 'badge partial', text: 'partial' }) : null,
      m.used ? null : h('span', { class: 'note', text: ' (not used)' }), ' '));
    const kv = h('dl', { class: 'kv' },
      h('dt', { text: 'executable' }), h('dd', { text: job.executable || '(unknown)' }),
      h('dt', { text: 'ranks' }), h('dd', { text: fmtInt(job.nprocs) + (job.hosts ? ' on ' + job.hosts + ' host(s)' : '') + (job.rank_source === 'workers' ? ' (the main process and ' + fmtInt(job.nprocs - 1) + ' Python worker' + (job.nprocs === 2 ? '' : 's') + ')' : '') }),
      job.clock ? h('dt', { text: 'clocks' }) : null,
      job.clock ? h('dd', { text: !job.clock.aligned ? job.clock.hosts + ' hosts, each process on its own host\'s clock (not measured)'
        : job.clock.aligned + ' host(s) put on rank 0\'s clock (moved by up to ' + fmtSec(job.clock.largest_shift_s) +
        '); timelines within ' + fmtSec(job.clock.uncertainty_s) + ' of each other' +
        (job.clock.hosts > job.clock.aligned ? '; ' + (job.clock.hosts - job.clock.aligned) + ' host(s) not measured' : '') }) : null,
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

    sec.append(filterNote('The summary\'s tables and figures', []));
    sec.append(card('Job', kv, figs));

    if (job.nodes) {
      const nodeRows = job.nodes.map((n) => ({ host: n.host, ranks: n.ranks.join(', '),
        aggregators: n.aggregators === null ? '–' : (n.aggregators.join(', ') || 'none'), bytes: n.bytes, io_seconds: n.io_seconds }));
      sec.append(card('Nodes', table([{ key: 'host', label: 'host', text: true }, { key: 'ranks', label: 'ranks', text: true },
        { key: 'aggregators', label: 'collective-buffering aggregators', text: true },
        { key: 'bytes', label: 'bytes (POSIX)', fmt: fmtBytes }, { key: 'io_seconds', label: 'seconds in POSIX calls', fmt: fmtSec }],
      nodeRows, { scroll: nodeRows.length > 12 })));
    }

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

    const acc = V.access_sizes || [];
    if (acc.length) {
      const rows = [];
      acc.forEach((a) => a.sizes.forEach(([size, count], k) => rows.push({
        layer: k ? '' : a.layer, size: size, count: count,
        source: k ? '' : (a.source === 'counters' ? 'counters (ACCESS1–4)' : 'traced operations') })));
      sec.append(card('Common access sizes',
        table([{ key: 'layer', label: 'interface', text: true }, { key: 'size', label: 'access size (bytes)', fmt: fmtInt },
          { key: 'count', label: 'count', fmt: fmtInt }, { key: 'source', label: 'from', text: true }], rows, { id: 'access-size-table' }),
        note('The four most common access sizes of each interface, over all files and ranks: from Darshan\'s ACCESS1–4 counters (summed over records, as PyDarshan\'s summary does), or counted from every traced read and write.')));
    }

    const fc = card('Findings (' + c.HIGH + ' critical, ' + c.WARN + ' warnings, ' + c.INFO + ' notes)');
    if (!R.findings.length) fc.append(note('No check fired.'));
    R.findings.forEach((f, i) => fc.append(findingEl(f, i)));
    const fired = Object.entries(R.thresholds_fired || {});
    if (fired.length) fc.append(note('Thresholds behind these findings: ' + fired.map(([k, v]) => k + '=' + v).join(', ')));
    sec.append(fc);
    if (SITES.length) sec.append(sitesCard());
  }

  // The program's lines with the most I/O seconds, each a way into the filter.
  const SITES_SHOWN = 20;
  function sitesCard() {
    const shown = SITES.slice(0, SITES_SHOWN);
    const list = h('ol', { class: 'sites', id: 'site-list' }, shown.map((s, k) => h('li', { title: (s.file ? s.file + ':' + s.line : '') },
      h('code', { text: siteText(s) }),
      h('button', { type: 'button', class: 'site-filter', 'data-site': String(k), text: 'filter by this call site',
        onclick: () => setFilter({ site: k }, 'sites') }))));
    const mark = () => list.querySelectorAll('button.site-filter').forEach((b) =>
      b.classList.toggle('active', String(FILTER.site) === b.dataset.site));
    mark();
    onFilter(mark);
    return card('Call sites (' + fmtInt(SITES.length) + ')', list,
      note('The lines of the program that made the I/O, most seconds first (calls and seconds of every operation from the line, all layers and ranks)' +
        (SITES.length > SITES_SHOWN ? '; the filter bar offers all ' + fmtInt(SITES.length) + '.' : '.')));
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
    const sites = (f.locations || []).filter((l) => l.kind === 'source');
    if (sites.length) {
      // The program's lines behind the finding; choosing one filters every view by it.
      const idx = (D.finding_sites || [])[i] || [];
      box.append(h('ul', { class: 'sites', id: 'finding-' + i + '-sites' }, sites.map((s, k) => {
        const at = idx[k] === undefined ? -1 : idx[k];
        const on = at >= 0 && FILTER.site === at;
        const where = s.file ? s.file + ':' + s.line : (s.module || '');
        return h('li', { title: where + (s.caller ? ' — called from ' + s.caller : '') },
          h('code', { text: siteText(s) }),
          at >= 0 ? h('button', { type: 'button', class: 'site-filter' + (on ? ' active' : ''), 'data-site': String(at),
            text: 'filter by this call site', onclick: () => setFilter({ site: at }, 'finding') }) : null);
      })));
      onFilter(() => box.querySelectorAll('button.site-filter').forEach((b) =>
        b.classList.toggle('active', String(FILTER.site) === b.dataset.site)));
    }
    if (f.recommendation) box.append(h('div', { class: 'rec', text: f.recommendation }));
    if (f.snippet) box.append(h('pre', { class: 'snippet' }, h('code', { text: f.snippet })));
    // A deep link to the view that shows it; the URL keeps it (#view=...&finding=...).
    const view = D.view_list.find((v) => v.key === D.finding_views[i] && v.offered);
    if (view && view.key !== 'summary') {
      box.append(h('a', { class: 'show-in', href: '#view=' + view.key + '&finding=' + i, text: 'show in ' + view.title + ' →' }));
    }
    return box;
  }

  IOP.views.summary = {
    draw(sec, data) {
      V = data;
      drawSummary(sec);
    },
  };
})();
