//! What the tests of every crate in this workspace share, so that there is one way to start a
//! server and one copy of each request, frame and probe.
//!
//! Servers are real and talk TCP on loopback. [`Server::start`] runs one in this process on its
//! own runtime thread, which is enough to test clients and tools against it. Tests that kill,
//! signal, crash or measure the server need it as a separate process: they start it from a
//! binary path with [`Launch::binary`]; only the package that builds `mqnamesrv` can name that
//! path, so Cargo is never run from a test.
//!
//! - `server`: a server in this process or from the binary, and calls to it with one timeout;
//! - `broker`: a test broker's registrations and the everyday requests (KV, route, cluster info);
//! - `controller`: a controller node's config text, NameServers embedding controller nodes,
//!   and a broker in controller mode;
//! - `netns`: a private network of namespaces made by a test, whose links it cuts and heals;
//! - `peers`: NameServers that list each other as peers and replicate the KV config;
//! - `frames`: frames as raw bytes, well-formed or as a hostile peer writes them;
//! - `tls`: a self-signed certificate, the properties that serve it, and clients over TLS;
//! - `probes`: what a process holds, read from `/proc`;
//! - `prometheus`: a real Prometheus scraping servers under test, and a dashboard's queries;
//! - `tools`: programs outside the workspace, whose absence skips a test unless all are required.

mod broker;
mod controller;
mod frames;
mod netns;
mod peers;
mod probes;
mod prometheus;
mod server;
mod tls;
mod tools;

pub use broker::*;
pub use controller::*;
pub use frames::*;
pub use netns::*;
pub use peers::*;
pub use probes::*;
pub use prometheus::*;
pub use server::*;
pub use tls::*;
pub use tools::*;
