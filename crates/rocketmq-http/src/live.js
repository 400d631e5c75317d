const live = (() => {
  const $ = (id) => document.getElementById(id);
  const secs = (ms) => { ms = Math.max(0, ms); return ms < 10000 ? (ms / 1000).toFixed(1) + ' s' : Math.floor(ms / 1000) + ' s'; };
  const rate = (v) => v >= 10 ? v.toFixed(0) : v.toFixed(1);
  const micros = (v) => v < 1000 ? v.toFixed(0) + ' µs' : v < 1e6 ? (v / 1000).toFixed(1) + ' ms' : (v / 1e6).toFixed(2) + ' s';
  const clock = (ms) => new Date(ms).toISOString().slice(11, 19);
  const uptime = (s) => s < 60 ? s + ' s' : s < 3600 ? Math.floor(s / 60) + ' min ' + s % 60 + ' s'
    : s < 86400 ? Math.floor(s / 3600) + ' h ' + Math.floor(s % 3600 / 60) + ' min'
    : Math.floor(s / 86400) + ' d ' + Math.floor(s % 86400 / 3600) + ' h';
  function fill(id, rows, empty) {
    const table = $(id);
    if (!table) return;
    while (table.rows.length > 1) table.deleteRow(1);
    if (!rows.length && empty) {
      const tr = table.insertRow();
      tr.className = 'empty';
      const td = tr.insertCell();
      td.colSpan = table.rows[0].cells.length;
      td.textContent = empty;
    }
    for (const cells of rows) {
      const tr = table.insertRow();
      for (const c of cells) {
        const td = tr.insertCell();
        if (Array.isArray(c)) {
          const span = document.createElement('span');
          span.className = c[1];
          span.textContent = c[0];
          td.appendChild(span);
        } else {
          td.textContent = c;
        }
      }
    }
  }
  function text(id, value) {
    const el = $(id);
    if (el) el.textContent = value;
  }
  function chart(id, points, now, span, fmt) {
    const svg = $(id);
    if (!svg) return;
    const shown = points.filter((p) => p[1] !== null);
    const max = Math.max(0, ...shown.map((p) => p[1]));
    const top = max > 0 ? max : 1;
    const w = 300, h = 60;
    svg.querySelector('polyline').setAttribute('points', shown.map(([at, v]) => {
      const x = w * Math.max(0, 1 - (now - at) / span);
      const y = h - 2 - (v / top) * (h - 4);
      return x.toFixed(1) + ',' + y.toFixed(1);
    }).join(' '));
    svg.dataset.points = shown.length;
    $(id + '-now').textContent = shown.length ? fmt(shown[shown.length - 1][1]) : '–';
    $(id + '-max').textContent = shown.length ? fmt(max) : '–';
  }
  function start(show) {
    let polls = 0, last = null;
    async function poll() {
      try {
        const answer = await fetch('status.json' + location.search, { cache: 'no-store' });
        if (!answer.ok) throw new Error('HTTP ' + answer.status);
        const s = await answer.json();
        show(s);
        last = s.now_ms;
        $('updated').textContent = 'updated ' + clock(last) + ' UTC';
        document.body.dataset.polls = ++polls;
      } catch (e) {
        $('updated').textContent = 'not updated' + (last ? ' since ' + clock(last) + ' UTC' : '') + ': ' + e.message;
      }
      setTimeout(poll, EVERY);
    }
    setTimeout(poll, EVERY);
  }
  return { $, secs, rate, micros, clock, uptime, fill, text, chart, start };
})();
