function showController(c, now) {
  const { fill, text, secs, clock } = live;
  const leader = c.leader_id ? c.leader_id + ' (' + c.leader_address + ')' : 'none';
  text('controller', 'node ' + c.self_id + ' of group ' + c.group + ' at ' + c.address + ': ' + c.role
    + ', term ' + c.term + ', leader ' + leader + '; hears from ' + c.live_brokers + ' brokers; elections: '
    + c.elections_new_master + ' new master, ' + c.elections_kept_master + ' kept, ' + c.elections_no_master
    + ' without a master');
  fill('controller-members', c.members.map((m) => [m.id + (m.this_node ? ' (this node)' : ''), m.address, m.role,
    m.this_node ? '-' : m.last_answer_ms === null ? 'not known here' : secs(m.last_answer_ms) + ' ago',
    m.lag === null ? '-' : m.lag]), 'no member: the group has not formed');
  const liveOf = (g) => c.live.filter((l) => l.cluster_name === g.cluster_name && l.broker_name === g.broker_name)
    .map((l) => l.broker_id + ': ' + secs(l.silent_ms)).join(', ');
  fill('replica-groups', c.groups.map((g) => [g.cluster_name, g.broker_name,
    g.master_broker_id === null ? 'none' : g.master_broker_id, g.master_epoch, g.sync_state_set.join(', '),
    g.sync_state_set_epoch, g.brokers.map(([id, addr]) => id + '=' + addr).join(', '), liveOf(g) || 'none heard']),
    'no broker group has registered');
  fill('controller-recent', c.recent.map((e) => [clock(e.at_ms), e.kind, e.of, e.detail]),
    'no election or leadership change since this node started');
}
