//! rdma_cm connection setup (-R, -z), as perftest does it: the server binds
//! the port and listens, the client resolves the server's address and route
//! and connects; each connection carries one QP. librdmacm is loaded at run
//! time by rdma-mummy-sys (a missing library fails the first call with
//! EOPNOTSUPP), so nothing here needs it to build.
//!
//! The QPs stay the caller's: each is moved to RTR and RTS with the attributes
//! rdma_init_qp_attr gives for its connection (the path rdma_cm resolved),
//! with this run's timeout, retry counts and reads in flight.
//! Every wait is bounded by --timeout and names its step and the peer.

pub mod link;
pub mod ud;

use crate::verbs::cm::link::CmLink;
use crate::verbs::device::qp::{Endpoint, QpEnd, MIN_RNR_TIMER};
use crate::verbs::device::{source_text, Port};
use crate::verbs::exchange::wire::Hello;
use crate::verbs::exchange::{ARRIVAL_POLL_MAX, ARRIVAL_POLL_MIN};
use crate::verbs::flags::Plan;
use anyhow::{anyhow, bail};
use sideway::ibverbs::device::DeviceInfo;
use sideway::ibverbs::queue_pair::{QueuePairAttribute, QueuePairState};
use sideway::rdmacm::communication_manager::{
    ConnectionParameter, Event, EventChannel, EventType, GetEventErrorKind, Identifier, PortSpace,
};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// perftest's rdma_resolve_addr and rdma_resolve_route timeouts.
pub(super) const RESOLVE_TIMEOUT: Duration = Duration::from_millis(2000);
/// Between a client's connection attempts (perftest: 100 ms).
pub(super) const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Why one connection attempt got no answer the client can use (the server
/// not listening yet, an rdma_cm event other than the one awaited): the
/// client tries again until the --timeout, then names the last one.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct NoAnswer(String);
/// Connection requests the listener queues: one per QP plus the exchange's.
pub(super) const BACKLOG: i32 = 64;

/// One line for an rdma_cm call that failed.
pub(super) fn failed(what: &str, e: &(dyn std::error::Error + 'static)) -> anyhow::Error {
    let text = source_text(e);
    if text.contains("Operation not supported") && what.contains("event channel") {
        return anyhow!(
            "rdma_cm is not available: librdmacm.so.1 could not be loaded (Debian/Ubuntu: apt install librdmacm1); drop -R/-z to use TCP"
        );
    }
    anyhow!("{what} failed: {text}")
}

/// One side's rdma_cm state: its event channel and, on the server, the listener.
pub struct Cm {
    channel: Arc<EventChannel>,
    /// The server's listening identifier, held open for the run (the -R QPs
    /// connect to it after the exchange's connection).
    _listener: Option<Arc<Identifier>>,
    pub port: u16,
    /// The client's destination.
    pub server: Option<SocketAddr>,
    /// The client's source: the address of this side's device.
    pub source: Option<SocketAddr>,
    /// The peer, as the errors name it.
    pub peer: String,
    pub timeout: Duration,
    pub retry_count: u8,
}

fn channel() -> anyhow::Result<Arc<EventChannel>> {
    let channel =
        EventChannel::new().map_err(|e| failed("creating the rdma_cm event channel", &e))?;
    // Polled with a deadline: a blocking read could wait for ever.
    channel
        .set_nonblocking(true)
        .map_err(|e| anyhow!("cannot poll the rdma_cm event channel: {e}"))?;
    Ok(channel)
}

fn param(qpn: u32) -> ConnectionParameter {
    let mut param = ConnectionParameter::default();
    param.setup_qp_number(qpn);
    param
}

impl Cm {
    /// The server: listens on `port` of every RDMA interface, or of
    /// `source` alone (--bind_source_ip, as perftest).
    pub fn listen(
        port: u16,
        timeout: Duration,
        retry_count: u8,
        source: Option<IpAddr>,
    ) -> anyhow::Result<Cm> {
        let channel = channel()?;
        let id = channel
            .create_id(PortSpace::Tcp)
            .map_err(|e| failed("creating an rdma_cm identifier", &e))?;
        let ip = source.unwrap_or(IpAddr::from([0, 0, 0, 0]));
        id.bind_addr(SocketAddr::new(ip, port))
            .map_err(|e| {
                anyhow!(
                    "cannot bind rdma_cm port {port}: {} (another server running? choose another with -p on both sides)",
                    source_text(&e)
                )
            })?;
        id.listen(BACKLOG)
            .map_err(|e| failed(&format!("listening on rdma_cm port {port}"), &e))?;
        Ok(Cm {
            channel,
            _listener: Some(id),
            port,
            server: None,
            source: None,
            peer: format!("the rdma_cm client on port {port}"),
            timeout,
            retry_count,
        })
    }

    /// The client of the server at `host`:`port` (an address of its RDMA
    /// interface), from `source` (this side's device's address) when known.
    pub fn client(
        host: &str,
        port: u16,
        timeout: Duration,
        retry_count: u8,
        source: Option<IpAddr>,
    ) -> anyhow::Result<Cm> {
        let addrs: Vec<SocketAddr> = (host, port)
            .to_socket_addrs()
            .map_err(|e| anyhow!("cannot resolve server address {host}: {e}"))?
            .collect();
        let v4 = source.is_none_or(|s| s.is_ipv4());
        let server = addrs
            .iter()
            .find(|a| a.is_ipv4() == v4)
            .or(addrs.first())
            .copied()
            .ok_or_else(|| anyhow!("server address {host} has no IP address"))?;
        // A source of the other family than the server's cannot be used.
        let source = source
            .filter(|s| s.is_ipv4() == server.is_ipv4())
            .map(|ip| SocketAddr::new(ip, 0));
        Ok(Cm {
            channel: channel()?,
            _listener: None,
            port,
            server: Some(server),
            source,
            peer: format!("the rdma_cm server at {server}"),
            timeout,
            retry_count,
        })
    }

    /// The next event, if one is waiting.
    pub fn poll_event(&self) -> anyhow::Result<Option<Event>> {
        match self.channel.get_cm_event() {
            Ok(event) => Ok(Some(event)),
            Err(e) if matches!(e.0, GetEventErrorKind::NoEvent) => Ok(None),
            Err(e) => Err(failed("reading the rdma_cm event channel", &e)),
        }
    }

    /// The next event of `id` (any connection request when None), or None
    /// once `deadline` passed; a disconnection of any of this side's
    /// connections is an error naming `step`.
    fn wait(
        &self,
        id: Option<&Arc<Identifier>>,
        step: &str,
        deadline: Instant,
    ) -> anyhow::Result<Option<Event>> {
        let mut pause = ARRIVAL_POLL_MIN;
        loop {
            if let Some(event) = self.poll_event()? {
                let kind = event.event_type();
                let mine = match (id, event.cm_id()) {
                    (Some(id), Some(of)) => Arc::ptr_eq(id, &of),
                    (None, _) => kind == EventType::ConnectRequest,
                    _ => false,
                };
                if kind == EventType::Disconnected || kind == EventType::DeviceRemoval {
                    bail!(
                        "{} disconnected (rdma_cm {kind:?}) during {step} (see the peer's output)",
                        self.peer
                    );
                }
                if mine {
                    return Ok(Some(event));
                }
                // Another connection's late event, or a second client: dropping
                // acknowledges it (and rejects the request).
                continue;
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(ARRIVAL_POLL_MAX);
        }
    }

    /// Client: connects one QP, retrying while the server is not listening
    /// yet, for at most the --timeout. `qpn_for` names the QP to connect (and
    /// may create it on the resolved device); `ready` moves it to RTS once
    /// the server accepted.
    pub fn connect(
        &self,
        step: &str,
        qpn_for: &mut dyn FnMut(&Arc<Identifier>) -> anyhow::Result<u32>,
        ready: &mut dyn FnMut(&Arc<Identifier>) -> anyhow::Result<()>,
    ) -> anyhow::Result<Arc<Identifier>> {
        let server = self.server.expect("a client has a server address");
        let deadline = Instant::now() + self.timeout;
        loop {
            let last = match self.attempt(server, step, deadline, qpn_for, ready)? {
                Ok(id) => return Ok(id),
                Err(last) => last,
            };
            if Instant::now() >= deadline {
                bail!(
                    "no rdma_cm server answered at {server} within {} s ({step}: {last}): start the server first (the same command without the address), \
                     give the address of the server's RDMA interface, check -p, or raise --timeout",
                    self.timeout.as_secs()
                );
            }
            std::thread::sleep(RETRY_PAUSE);
        }
    }

    /// One connection attempt: the connected identifier, or why to try again.
    fn attempt(
        &self,
        server: SocketAddr,
        step: &str,
        deadline: Instant,
        qpn_for: &mut dyn FnMut(&Arc<Identifier>) -> anyhow::Result<u32>,
        ready: &mut dyn FnMut(&Arc<Identifier>) -> anyhow::Result<()>,
    ) -> anyhow::Result<Result<Arc<Identifier>, NoAnswer>> {
        let id = self
            .channel
            .create_id(PortSpace::Tcp)
            .map_err(|e| failed("creating an rdma_cm identifier", &e))?;
        // Bound first, as rdma_resolve_addr binds to its source: sideway
        // 0.4.3's resolve_addr passes the source from a temporary dropped
        // before the call (EINVAL in release builds).
        if let Some(source) = self.source {
            id.bind_addr(source)
                .map_err(|e| failed(&format!("binding to {source} (rdma_bind_addr)"), &e))?;
        }
        id.resolve_addr(None, server, RESOLVE_TIMEOUT)
            .map_err(|e| failed(&format!("resolving {server} (rdma_resolve_addr)"), &e))?;
        let answer = |phase: &str, want: EventType| -> anyhow::Result<Result<(), NoAnswer>> {
            let Some(event) = self.wait(Some(&id), &format!("{phase} of {step}"), deadline)? else {
                return Ok(Err(NoAnswer(format!("no answer to {phase}"))));
            };
            let kind = event.event_type();
            Ok(if kind == want {
                Ok(())
            } else {
                Err(NoAnswer(format!(
                    "{phase}: rdma_cm {kind:?}, status {}",
                    event.status()
                )))
            })
        };
        if let Err(why) = answer("the address resolution", EventType::AddressResolved)? {
            return Ok(Err(why));
        }
        id.resolve_route(RESOLVE_TIMEOUT)
            .map_err(|e| failed(&format!("resolving the route to {server}"), &e))?;
        if let Err(why) = answer("the route resolution", EventType::RouteResolved)? {
            return Ok(Err(why));
        }
        let qpn = qpn_for(&id)?;
        id.connect(param(qpn))
            .map_err(|e| failed(&format!("connecting {step} (rdma_connect)"), &e))?;
        if let Err(why) = answer("the connection request", EventType::ConnectResponse)? {
            return Ok(Err(why));
        }
        ready(&id)?;
        id.establish()
            .map_err(|e| failed(&format!("establishing {step}"), &e))?;
        Ok(Ok(id))
    }

    /// Server: accepts the next connection; `ready` moves its QP to RTS and
    /// names it.
    pub fn accept(
        &self,
        step: &str,
        ready: &mut dyn FnMut(&Arc<Identifier>) -> anyhow::Result<u32>,
    ) -> anyhow::Result<Arc<Identifier>> {
        let deadline = Instant::now() + self.timeout;
        let Some(event) = self.wait(None, step, deadline)? else {
            bail!(
                "no client connected to rdma_cm port {} within {} s ({step}): start the client (same command plus this host's RDMA interface address), or raise --timeout",
                self.port,
                self.timeout.as_secs()
            );
        };
        let id = event
            .cm_id()
            .expect("a connection request has its identifier");
        drop(event);
        let qpn = ready(&id)?;
        id.accept(param(qpn))
            .map_err(|e| failed(&format!("accepting {step} (rdma_accept)"), &e))?;
        let Some(event) = self.wait(Some(&id), step, deadline)? else {
            bail!(
                "{} did not complete {step} within {} s of this side's accept (raise --timeout if it is slow)",
                self.peer,
                self.timeout.as_secs()
            );
        };
        match event.event_type() {
            EventType::Established => Ok(id),
            other => bail!(
                "{} did not complete {step} (rdma_cm {other:?}, status {})",
                self.peer,
                event.status()
            ),
        }
    }
}

/// The device and port rdma_cm chose for `id`.
fn device_of(id: &Identifier) -> (String, u8) {
    let device = id.get_device_context().map(|c| c.name());
    (device.unwrap_or_default(), id.port())
}

/// The device and port rdma_cm chose for `step` must be this side's.
pub(super) fn check_device(
    device: &str,
    port_num: u8,
    port: &Port,
    step: &str,
) -> anyhow::Result<()> {
    if device != port.device || port_num != port.port {
        bail!(
            "-R/--rdma_cm: rdma_cm routed {step} through {device} port {port_num}, but this side's QPs are on {} port {}: \
             give -d {device} (the device of the address), or the address of {}'s interface",
            port.device,
            port.port,
            port.device
        );
    }
    Ok(())
}

/// Moves `end` to RTR and RTS with `id`'s attributes and this run's settings;
/// the QP rdma_cm connected it to must be the peer's `remote_qpn`.
pub fn ready_qp(
    end: &mut QpEnd,
    id: &Identifier,
    settings: QpSettings,
    remote_qpn: u32,
    step: &str,
) -> anyhow::Result<()> {
    let attr = |state: QueuePairState, name: &str| -> anyhow::Result<QueuePairAttribute> {
        id.get_qp_attr(state)
            .map_err(|e| failed(&format!("rdma_init_qp_attr({name}) for {step}"), &e))
    };
    let mut rtr = attr(QueuePairState::ReadyToReceive, "RTR")?;
    if rtr.dest_qp_num() != remote_qpn {
        bail!(
            "rdma_cm connected {step} to QP 0x{:x}, but the peer's details name QP 0x{remote_qpn:x}: another client on the port? (see the peer's output)",
            rtr.dest_qp_num()
        );
    }
    rtr.setup_max_dest_read_atomic(settings.out_reads)
        .setup_min_rnr_timer(MIN_RNR_TIMER);
    end.modify(&rtr, "RTR", " (rdma_cm's path)")?;
    let mut rts = attr(QueuePairState::ReadyToSend, "RTS")?;
    rts.setup_timeout(settings.qp_timeout)
        .setup_retry_cnt(settings.retry_count)
        .setup_rnr_retry(settings.rnr_retry)
        .setup_max_read_atomic(settings.out_reads);
    end.modify(&rts, "RTS", "")
}

/// What a QP connected through rdma_cm gets on top of rdma_cm's attributes.
#[derive(Clone, Copy, Debug)]
pub struct QpSettings {
    pub qp_timeout: u8,
    pub retry_count: u8,
    pub rnr_retry: u8,
    pub out_reads: u8,
}

/// -R over RC (UD: cm_ud.rs): connects every QP of `endpoint` to the peer's through rdma_cm, one
/// connection each, in order (the client connects QP i once QP i - 1 is up).
pub fn connect_qps(
    link: &mut CmLink,
    port: &Port,
    endpoint: &mut Endpoint,
    plan: &Plan,
    peer: &Hello,
    out_reads: u8,
) -> anyhow::Result<()> {
    // perftest -R: rdma_cm's retry_count for both retry counts.
    let settings = QpSettings {
        qp_timeout: plan.qp_timeout,
        retry_count: plan.cm.retry_count,
        rnr_retry: plan.cm.retry_count,
        out_reads,
    };
    let client = link.is_client();
    let count = endpoint.qps.len();
    for (i, (end, remote)) in endpoint.qps.iter_mut().zip(&peer.qps).enumerate() {
        let step = format!("the rdma_cm connection of QP {i} (of {count})");
        let qpn = end.qpn();
        let cm = link.cm();
        let id = if client {
            cm.connect(
                &step,
                &mut |id| {
                    let (device, port_num) = device_of(id);
                    check_device(&device, port_num, port, &step).map(|()| qpn)
                },
                &mut |id| ready_qp(end, id, settings, remote.qpn, &step),
            )?
        } else {
            cm.accept(&step, &mut |id| {
                let (device, port_num) = device_of(id);
                check_device(&device, port_num, port, &step)?;
                ready_qp(end, id, settings, remote.qpn, &step)?;
                Ok(qpn)
            })?
        };
        link.keep(id);
    }
    Ok(())
}

/// The link of a plain start with -R or -z: the server waits for the client
/// (printing so, as perftest), the client connects to HOST.
pub fn open_link(plan: &Plan, port: &Port, program: &str) -> anyhow::Result<CmLink> {
    let retry = plan.cm.retry_count;
    match &plan.host {
        Some(host) => {
            let cm = Cm::client(host, plan.tcp_port, plan.timeout, retry, source_of(port))?;
            CmLink::connect(cm)
        }
        None => {
            println!(
                "{program}: waiting up to {} s for a client on rdma_cm port {} (start the same command with this host's RDMA interface address)",
                plan.timeout.as_secs(),
                plan.tcp_port
            );
            let source = plan.path.source_ip();
            CmLink::serve(Cm::listen(plan.tcp_port, plan.timeout, retry, source)?)
        }
    }
}

/// The IP address of this side's GID (RoCE): the client binds to it, so that
/// rdma_cm routes the connections through this side's device (-d), not
/// through whichever device owns the route to the server.
fn source_of(port: &Port) -> Option<IpAddr> {
    let gid = port.gid.as_ref()?.entry.gid;
    match gid.to_ipv4_mapped() {
        Some(v4) => Some(IpAddr::V4(v4)),
        None if gid.is_unicast_link_local() => None,
        None => Some(IpAddr::V6(gid)),
    }
}
