//! Who a group's members are, as a config file names them (`controllerDLegerPeers`,
//! `namesrvPeers`): `n0-host:port;n1-host:port`. A member id is a prefix every member shares and a
//! number, the member's Raft id, so that an id stays the same whatever members come and go. This
//! node's own id is given, or `auto`: the prefix and the ordinal that ends this host's name, so
//! that one config file serves every pod of a StatefulSet (`mqnamesrv-2` is `n2`).
//!
//! One reading for every group: an entry is `id-host:port` (the id ends at the first `-`); the
//! same id listed twice at the same address counts once, at two addresses is refused, as is an
//! id of another prefix or without a number.

use crate::NodeId;

/// The self id that takes the id from this host's name.
pub const SELF_ID_AUTO: &str = "auto";

/// A member as the config lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// `n3`.
    pub id: String,
    /// Its peer address, `host:port`: a name resolved again and again ([`crate::trust`]).
    pub addr: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MemberError {
    #[error("no member is listed")]
    Empty,
    #[error("{0} is not a member entry (id-host:port)")]
    Entry(String),
    #[error(
        "member id {0} is not the members' common prefix followed by a number (n0, n1, n2, ...); \
         the number is the member's Raft id"
    )]
    Id(String),
    #[error("member {id} is listed at two addresses, {first} and {second}")]
    TwoAddresses {
        id: String,
        first: String,
        second: String,
    },
    #[error("{0} is not one of the members")]
    SelfNotListed(String),
    #[error("{0}")]
    NoOrdinal(String),
}

/// The members a config lists and which of them this node is.
#[derive(Clone, Debug)]
pub struct Members {
    prefix: String,
    /// Sorted by Raft id.
    list: Vec<Member>,
    self_id: String,
}

impl Members {
    /// Reads a member list and this node's id (`auto` allowed).
    pub fn parse(list: &str, self_id: &str) -> Result<Members, MemberError> {
        Members::new(parse_list(list)?, self_id)
    }

    /// Checks members listed by other means (the JRaft flavour's address lists) and this node's id.
    pub fn new(listed: Vec<Member>, self_id: &str) -> Result<Members, MemberError> {
        let first = listed.first().ok_or(MemberError::Empty)?;
        let prefix = member_id_parts(&first.id)
            .ok_or_else(|| MemberError::Id(first.id.clone()))?
            .0
            .to_string();
        let mut list: Vec<(NodeId, Member)> = Vec::with_capacity(listed.len());
        for member in listed {
            let number = match member_id_parts(&member.id) {
                Some((p, n)) if p == prefix => n,
                _ => return Err(MemberError::Id(member.id)),
            };
            match list.iter().find(|(n, _)| *n == number) {
                Some((_, held)) if held.addr == member.addr => {}
                Some((_, held)) => {
                    return Err(MemberError::TwoAddresses {
                        id: member.id,
                        first: held.addr.clone(),
                        second: member.addr,
                    })
                }
                None => list.push((number, member)),
            }
        }
        list.sort_by_key(|(n, _)| *n);
        let self_id = resolve_self_id(self_id, &prefix).map_err(MemberError::NoOrdinal)?;
        if !list.iter().any(|(_, m)| m.id == self_id) {
            return Err(MemberError::SelfNotListed(self_id));
        }
        Ok(Members {
            prefix,
            list: list.into_iter().map(|(_, m)| m).collect(),
            self_id,
        })
    }

    /// The members, by Raft id.
    pub fn list(&self) -> &[Member] {
        &self.list
    }

    /// Each member's Raft id and address.
    pub fn by_node(&self) -> impl Iterator<Item = (NodeId, &str)> {
        self.list
            .iter()
            .filter_map(|m| Some((self.node_id(&m.id)?, m.addr.as_str())))
    }

    /// What every member id starts with (`n` of `n0`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// This node's member id.
    pub fn self_id(&self) -> &str {
        &self.self_id
    }

    /// This node's Raft id.
    pub fn self_node(&self) -> NodeId {
        self.node_id(&self.self_id)
            .expect("checked when the members were read")
    }

    /// This node as listed.
    pub fn self_member(&self) -> &Member {
        self.list
            .iter()
            .find(|m| m.id == self.self_id)
            .expect("checked when the members were read")
    }

    /// The Raft id of a member id (`n3` → 3), listed or not: members added later are named the
    /// same way.
    pub fn node_id(&self, id: &str) -> Option<NodeId> {
        member_id_parts(id)
            .filter(|(prefix, _)| *prefix == self.prefix)
            .map(|(_, n)| n)
    }

    /// The member id of a Raft id (3 → `n3`).
    pub fn name(&self, node: NodeId) -> String {
        format!("{}{node}", self.prefix)
    }

    /// The listed member of a Raft id.
    pub fn get(&self, node: NodeId) -> Option<&Member> {
        self.list.iter().find(|m| self.node_id(&m.id) == Some(node))
    }
}

/// The entries of a member list, as written: `n0-127.0.0.1:9878;n1-127.0.0.1:9868` (blank
/// entries skipped, spaces around ids and addresses ignored).
pub fn parse_list(text: &str) -> Result<Vec<Member>, MemberError> {
    let mut members = Vec::new();
    for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let invalid = || MemberError::Entry(entry.to_string());
        let (id, addr) = entry.split_once('-').ok_or_else(invalid)?;
        let (id, addr) = (id.trim(), addr.trim());
        if id.is_empty() || !is_address(addr) {
            return Err(invalid());
        }
        members.push(Member {
            id: id.to_string(),
            addr: addr.to_string(),
        });
    }
    if members.is_empty() {
        return Err(MemberError::Empty);
    }
    Ok(members)
}

/// Whether `addr` is `host:port`.
pub fn is_address(addr: &str) -> bool {
    addr.rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
}

/// A member id as its prefix and number: `n12` → (`n`, 12). The number has no leading zero
/// (`n01` would be a second spelling of `n1`) and the prefix no digit at its end.
pub fn member_id_parts(id: &str) -> Option<(&str, u64)> {
    let digits = id.len() - id.bytes().rev().take_while(u8::is_ascii_digit).count();
    let (prefix, number) = id.split_at(digits);
    if number.is_empty() || (number.len() > 1 && number.starts_with('0')) {
        return None;
    }
    Some((prefix, number.parse().ok()?))
}

/// A self id as configured, or, for [`SELF_ID_AUTO`], `prefix` followed by the ordinal that ends
/// this host's name (the kernel's: its UTS namespace's, which is the pod's name in Kubernetes).
pub fn resolve_self_id(given: &str, prefix: &str) -> Result<String, String> {
    let given = given.trim();
    if !given.eq_ignore_ascii_case(SELF_ID_AUTO) {
        return Ok(given.to_string());
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_err(|e| format!("cannot read this host's name: {e}"))?;
    let host = host.trim();
    let ordinal = host_ordinal(host).ok_or_else(|| {
        format!(
            "this host's name {host:?} does not end in -N (a StatefulSet's pod name, such as \
             mqnamesrv-2), so it names no member"
        )
    })?;
    Ok(format!("{prefix}{ordinal}"))
}

/// The ordinal that ends a host's first label after a `-`: `mqnamesrv-2` and
/// `mqnamesrv-2.mqnamesrv-members` give 2; `mqnamesrv`, `mqnamesrv-` and `mqnamesrv-02` none.
pub fn host_ordinal(host: &str) -> Option<u64> {
    let (_, digits) = host.split('.').next()?.rsplit_once('-')?;
    member_id_parts(digits)
        .filter(|(prefix, _)| prefix.is_empty())
        .map(|(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_read_by_raft_id_with_this_node_among_them() {
        let m = Members::parse("n10-h:3; n2-h:1 ;;n3-h:2", "n3").unwrap();
        let ids: Vec<&str> = m.list().iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["n2", "n3", "n10"]);
        assert_eq!((m.self_node(), m.self_member().addr.as_str()), (3, "h:2"));
        assert_eq!(
            (m.node_id("n7"), m.node_id("x7"), m.node_id("n07")),
            (Some(7), None, None)
        );
        assert_eq!(m.name(5), "n5");
        assert_eq!(m.get(10).map(|m| m.addr.as_str()), Some("h:3"));
        let by_node: Vec<_> = m.by_node().collect();
        assert_eq!(by_node, [(2, "h:1"), (3, "h:2"), (10, "h:3")]);
    }

    #[test]
    fn a_member_listed_twice_counts_once_at_one_address_and_is_refused_at_two() {
        let m = Members::parse("n0-h:1;n1-h:2;n0-h:1", "n0").unwrap();
        assert_eq!(m.list().len(), 2);
        assert_eq!(
            Members::parse("n0-h:1;n1-h:2;n0-h:3", "n0").unwrap_err(),
            MemberError::TwoAddresses {
                id: "n0".into(),
                first: "h:1".into(),
                second: "h:3".into()
            }
        );
    }

    #[test]
    fn bad_entries_ids_and_strangers_are_refused_with_what_is_wrong() {
        assert_eq!(parse_list(" ; ").unwrap_err(), MemberError::Empty);
        for bad in [
            "n0-127.0.0.1",
            "127.0.0.1:9878",
            "-h:1",
            "n0-:1",
            "n0-h:70000",
        ] {
            assert!(
                matches!(parse_list(bad), Err(MemberError::Entry(_))),
                "{bad}"
            );
        }
        for (bad, me) in [
            ("a-h:1;b-h:2", "a"),
            ("n0-h:1;m1-h:2", "n0"),
            ("n0-h:1;n01-h:2", "n0"),
        ] {
            assert!(
                matches!(Members::parse(bad, me), Err(MemberError::Id(_))),
                "{bad}"
            );
        }
        assert_eq!(
            Members::parse("n0-h:1", "n7").unwrap_err(),
            MemberError::SelfNotListed("n7".into())
        );
    }

    #[test]
    fn a_pod_name_s_ordinal_is_its_member_number() {
        assert_eq!(host_ordinal("mqnamesrv-2"), Some(2));
        assert_eq!(host_ordinal("my-release-mqnamesrv-10.members.ns"), Some(10));
        assert_eq!(host_ordinal("mqnamesrv-0"), Some(0));
        for none in [
            "mqnamesrv",
            "mqnamesrv-",
            "mqnamesrv-02",
            "mqnamesrv-x1",
            "",
            "-",
        ] {
            assert_eq!(host_ordinal(none), None, "{none}");
        }
        // A given id is kept as it is; only `auto` asks the host's name.
        assert_eq!(resolve_self_id(" n4 ", "n").unwrap(), "n4");
    }
}
