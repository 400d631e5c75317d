//! A topic's route as clients read it, assembled from the tables; the route cache
//! ([`super::RouteTable`]) keeps it encoded until something it shows changes.

use rocketmq_wire::body::TopicRouteData;

use super::queues::TopicQueues;
use super::tables::{key, Registry, MASTER_ID, PERM_WRITE};

const SYNC_BROKER_MEMBER_PREFIX: &str = "rmq_sys_SYNC_BROKER_MEMBER_";

impl Registry {
    /// Assembles a topic's route; `None` if the topic or all its brokers are unknown.
    pub fn route(&self, topic: &str, acting_master: bool) -> Option<TopicRouteData> {
        let queues = self.topics.get(topic)?;
        let mut route = TopicRouteData {
            queue_datas: queues.to_queue_datas(),
            ..Default::default()
        };
        for (name, _) in queues.iter() {
            if let Some(bd) = self.brokers.get(name) {
                route.broker_datas.push(bd.clone());
            }
        }
        if route.broker_datas.is_empty() {
            return None;
        }
        if !self.filter_servers.is_empty() {
            for bd in &route.broker_datas {
                for addr in bd.broker_addrs.values() {
                    if let Some(list) = self.filter_servers.get(&key(&bd.cluster, addr)) {
                        route.filter_server_table.insert(addr.clone(), list.clone());
                    }
                }
            }
        }
        route.topic_queue_mapping_by_broker = self.mappings.get(topic).cloned();
        if acting_master && !topic.starts_with(SYNC_BROKER_MEMBER_PREFIX) {
            self.rewrite_acting_master(&mut route, queues);
        }
        Some(route)
    }

    /// Lets clients treat the lowest slave of a master-less group as master, when that group's
    /// queue data is no longer writable.
    fn rewrite_acting_master(&self, route: &mut TopicRouteData, queues: &TopicQueues) {
        for bd in &mut route.broker_datas {
            if !bd.enable_acting_master
                || bd.broker_addrs.contains_key(&MASTER_ID)
                || queues
                    .get(&bd.broker_name)
                    .is_some_and(|qd| qd.perm & PERM_WRITE != 0)
            {
                continue;
            }
            if let Some((_, addr)) = bd.broker_addrs.pop_first() {
                bd.broker_addrs.insert(MASTER_ID, addr);
            }
        }
    }
}
