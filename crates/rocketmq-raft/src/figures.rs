//! What a group's series and status show, read from a [`Group`](crate::Group) at scrape time:
//! the node's role, its leader and term, how long since it last had word from a working group,
//! and each member as the node's Raft core knows it. They are written as Prometheus series by
//! the HTTP crate (`rocketmq_http::group_series`), the same for every group of ours.

/// What a group's series show, read from [`Group`](crate::Group) at scrape time.
#[derive(Clone, Debug)]
pub struct Figures {
    /// openraft's state name (`Leader`, `Follower`, ...) or `Stopped (why)`.
    pub role: String,
    pub is_leader: bool,
    /// Whether the node names a leader it has heard from within the lease (itself included).
    pub has_leader: bool,
    pub term: u64,
    pub quorum_contact_ms: Option<u64>,
    pub members: Vec<Member>,
}

/// One member as this node's Raft core knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub node: crate::NodeId,
    pub address: String,
    /// `leader`, `follower` or `learner`.
    pub role: &'static str,
    /// The last log index it holds, as the leader last heard (this node's own everywhere).
    pub matched_index: Option<u64>,
    /// Entries of the leader's log it lacks (known on the leader).
    pub lag: Option<u64>,
    /// Milliseconds since it last answered this node's Raft requests.
    pub last_answer_ms: Option<u64>,
    pub this_node: bool,
}
