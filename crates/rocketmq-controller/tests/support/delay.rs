//! A slow link between two nodes' namespaces, for kernels without `sch_netem`: the traffic
//! between the two nodes' addresses is routed through a TUN device in each namespace, and this
//! process relays the IP packets from one device to the other after a delay (and drops a share
//! of them), both ways. Everything else (brokers, the test's own requests) still goes over the
//! bridge undelayed.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::unix::AsyncFd;

use namesrv_testkit::{ip, Net};

/// `struct ifreq` as TUNSETIFF reads it: the interface name, then the flags.
#[repr(C)]
struct IfReq {
    name: [u8; 16],
    flags: libc::c_short,
    _rest: [u8; 22],
}

/// A TUN device named `name` (in this process's namespace), its packets without a header.
fn open_tun(name: &str) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/net/tun")?;
    let mut req = IfReq {
        name: [0; 16],
        flags: (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short,
        _rest: [0; 22],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: `req` is a live, properly laid out ifreq for the duration of the call.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(file)
}

/// Sends what `from` reads to `to`, `delay` later, dropping `loss` of it.
async fn relay(
    from: Arc<AsyncFd<File>>,
    to: Arc<AsyncFd<File>>,
    delay: Duration,
    loss: f64,
    seed: u64,
) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut buf = vec![0u8; 65_536];
    loop {
        let Ok(mut ready) = from.readable().await else {
            return;
        };
        match ready.try_io(|fd| fd.get_ref().read(&mut buf)) {
            Ok(Ok(n)) if n > 0 => {
                if rng.f64() < loss {
                    continue;
                }
                let packet = buf[..n].to_vec();
                let to = to.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = to.get_ref().write(&packet);
                });
            }
            Ok(_) => return,
            Err(_would_block) => continue,
        }
    }
}

/// A slow link in place: its TUN devices and the tasks relaying between them.
pub struct SlowLink {
    /// (namespace, device) of each end.
    ends: Vec<(String, String)>,
    relays: Vec<tokio::task::JoinHandle<()>>,
}

impl SlowLink {
    /// Puts the link back on the bridge: the relays stop, and deleting the devices deletes the
    /// routes through them. A device goes by itself once its last descriptor closes, which the
    /// stopped relays may already have done, so a device that is gone is not an error; one that
    /// a delayed packet still holds open is deleted here.
    pub fn remove(self) {
        for relay in &self.relays {
            relay.abort();
        }
        for (ns, dev) in &self.ends {
            let _ = std::process::Command::new("ip")
                .args(["-n", ns, "link", "del", dev])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

/// Makes the link between nodes `i` and `j` of `net` slow: `delay` each way, `loss` of the
/// packets dropped each way. Lasts until `SlowLink::remove`, or as long as the namespaces (the
/// relay tasks end with the runtime).
pub fn slow_link(net: &Net, i: usize, j: usize, delay: Duration, loss: f64) -> SlowLink {
    let mut fds = Vec::new();
    let mut ends = Vec::new();
    for (here, there) in [(i, j), (j, i)] {
        let name = format!("{}t{here}{there}", net.tag());
        let tun = open_tun(&name).expect("a TUN device");
        ip(&["link", "set", &name, "netns", &net.ns(here)]);
        ip(&["-n", &net.ns(here), "link", "set", &name, "up"]);
        let to = format!("{}/32", net.node_ip(there));
        ip(&["-n", &net.ns(here), "route", "add", &to, "dev", &name]);
        // SAFETY: the `File` owns its descriptor and the AsyncFd owns the `File`: it stays open
        // and the same for the AsyncFd's whole life.
        let end = unsafe { AsyncFd::register(tun) }.expect("a pollable TUN device");
        fds.push(Arc::new(end));
        ends.push((net.ns(here), name));
    }
    let seed = (i * 10 + j) as u64;
    let relays = vec![
        tokio::spawn(relay(fds[0].clone(), fds[1].clone(), delay, loss, seed)),
        tokio::spawn(relay(fds[1].clone(), fds[0].clone(), delay, loss, seed + 1)),
    ];
    SlowLink { ends, relays }
}
