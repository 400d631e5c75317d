live.start((s) => {
  const { $, fill, chart, secs, rate, micros, clock, uptime } = live;
  $('address').textContent = s.server.address;
  $('uptime').textContent = uptime(s.server.uptime_s);
  $('ready').textContent = s.server.ready ? 'ready' : 'not ready';
  fill('clusters', s.clusters.map((c) => [c.name, c.groups, c.addresses]), 'no cluster registered');
  const attention = $('attention');
  attention.replaceChildren(...s.flagged.map((g) => {
    const li = document.createElement('li');
    li.textContent = g.cluster + ' / ' + g.name + ': ' + g.flags.join(', ');
    return li;
  }));
  if (!s.flagged.length) {
    const li = document.createElement('li');
    li.className = 'muted';
    li.textContent = 'no masterless or read-only groups';
    attention.appendChild(li);
  }
  fill('brokers', s.brokers.rows.map((b) => [b.cluster, b.name, b.id, b.role, b.addr, b.version ?? '-',
    b.heartbeat ? [secs(b.heartbeat.age_ms) + ' / ' + secs(b.heartbeat.timeout_ms), 'hb-' + b.heartbeat.health] : ['not live', 'hb-dead'],
    b.topics, b.flags.join(', ')]), 'no broker registered');
  document.querySelector('#topics p').textContent = s.topics + ' topics';
  fill('changes', s.changes.map((e) => [clock(e.at_ms), e.label, e.what, e.detail]), 'no change since the server started');
  const span = s.series.span_s * 1000, points = s.series.points;
  chart('chart-rate', points.map((p) => [p.at_ms, p.secs > 0 ? p.requests / p.secs : 0]), s.now_ms, span, rate);
  chart('chart-p99', points.map((p) => [p.at_ms, p.p99_us]), s.now_ms, span, micros);
  if (s.controller && typeof showController === 'function') showController(s.controller, s.now_ms);
  if (s.peers) showPeers(s.peers, s.peer_routes ?? []);
});
function showPeers(p, routes) {
  const { fill, text, secs } = live;
  text('peers', 'NameServer ' + p.self_id + ' of the KV group: ' + p.role + ', term ' + p.term + ', leader '
    + (p.leader ?? 'none') + '; applied entry ' + (p.applied ?? 'none') + '; '
    + (p.caught_up ? 'caught up' : 'catching up'));
  fill('peer-members', p.members.map((m) => [m.id + (m.this_node ? ' (this node)' : ''), m.address, m.role,
    m.this_node ? '-' : m.last_answer_ms === null ? 'not known here' : secs(m.last_answer_ms) + ' ago',
    m.lag === null ? '-' : m.lag]), 'no member: the group has not formed');
  fill('peer-routes', routes.map((r) => [r.id, r.address, r.differences,
    r.disagreeing_ms === null ? '-' : secs(r.disagreeing_ms),
    r.last_exchange_ms === null ? 'never' : secs(r.last_exchange_ms) + ' ago']));
}
