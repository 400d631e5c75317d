use std::collections::{BTreeMap, BTreeSet};

use super::{as_object, parse_object, strings_of, BrokerData};
use crate::error::BodyError;
use crate::json::{JsonStyle, JsonWriter, ObjectExt};

/// The answer to GET_BROKER_CLUSTER_INFO; always in fastjson's form.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ClusterInfo {
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    pub cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
}

impl ClusterInfo {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = JsonWriter::new(JsonStyle::Fastjson);
        w.object(|w| {
            w.key("brokerAddrTable").object(|w| {
                for (name, bd) in &self.broker_addr_table {
                    w.key(name);
                    bd.write(w);
                }
            });
            w.key("clusterAddrTable").object(|w| {
                for (cluster, names) in &self.cluster_addr_table {
                    w.key(cluster)
                        .string_array(names.iter().map(String::as_str));
                }
            });
        });
        w.finish()
    }

    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        let obj = parse_object(body, "ClusterInfo")?;
        let mut info = ClusterInfo::default();
        for (name, bd) in obj.opt_object("brokerAddrTable")?.into_iter().flatten() {
            let bd = BrokerData::from_object(as_object(bd, "BrokerData")?)?;
            info.broker_addr_table.insert(name.clone(), bd);
        }
        for (cluster, names) in obj.opt_object("clusterAddrTable")?.into_iter().flatten() {
            info.cluster_addr_table
                .insert(cluster.clone(), strings_of(names));
        }
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_cluster_info() {
        let golden = r#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"192.168.0.1:10911",1:"192.168.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}"#;
        let info = ClusterInfo::decode(golden.as_bytes()).unwrap();
        assert_eq!(info.encode(), golden.as_bytes());
        assert_eq!(
            ClusterInfo::default().encode(),
            br#"{"brokerAddrTable":{},"clusterAddrTable":{}}"#
        );
    }
}
