//! -R with -c UD, as perftest: each UD QP finds its peer's through rdma_cm's
//! UDP port space (a SIDR request and reply, no connection). The client
//! takes the address handle, the server's QP number and the Q_Key from the
//! ESTABLISHED event's UD parameters; both QPs take rdma_cm's Q_Key. A SIDR
//! request names no QP, so the server addresses the client's from the
//! details already exchanged (perftest has the client send it in a first
//! datagram), as the TCP path does.
//!
//! sideway does not expose an event's UD parameters, so this part of rdma_cm
//! goes through librdmacm's own calls, on an event channel of its own. Every
//! wait is bounded by --timeout and names its step and the peer.

use crate::verbs::cm::{check_device, failed, Cm, NoAnswer, BACKLOG, RESOLVE_TIMEOUT, RETRY_PAUSE};
use crate::verbs::device::path::route;
use crate::verbs::device::qp::Endpoint;
use crate::verbs::device::ud;
use crate::verbs::device::Port;
use crate::verbs::exchange::wire::Hello;
use crate::verbs::exchange::{ARRIVAL_POLL_MAX, ARRIVAL_POLL_MIN};
use crate::verbs::flags::Plan;
use anyhow::{anyhow, bail};
use nix::sys::socket::{SockaddrLike, SockaddrStorage};
use rdma_mummy_sys::{
    ibv_get_device_name, ibv_qp_attr, ibv_qp_state, rdma_accept, rdma_ack_cm_event, rdma_bind_addr,
    rdma_cm_event, rdma_cm_event_type as E, rdma_cm_id, rdma_conn_param, rdma_connect,
    rdma_create_event_channel, rdma_create_id, rdma_destroy_event_channel, rdma_destroy_id,
    rdma_event_channel, rdma_get_cm_event, rdma_init_qp_attr, rdma_listen, rdma_port_space,
    rdma_resolve_addr, rdma_resolve_route, rdma_ud_param,
};
use sideway::rdmacm::communication_manager::EventType;
use std::ffi::CStr;
use std::net::{IpAddr, SocketAddr};
use std::ptr::NonNull;
use std::time::Instant;

/// The last librdmacm call's failure as one line.
fn os_failed(what: &str) -> anyhow::Error {
    failed(what, &std::io::Error::last_os_error())
}

/// librdmacm's status: 0, else -1 with errno.
fn check(rc: i32, what: &str) -> anyhow::Result<()> {
    match rc {
        0 => Ok(()),
        _ => Err(os_failed(what)),
    }
}

/// An event, acknowledged when dropped.
struct Event(NonNull<rdma_cm_event>);

impl Event {
    fn get(&self) -> &rdma_cm_event {
        // SAFETY: librdmacm's event, alive until acknowledged in drop.
        unsafe { self.0.as_ref() }
    }

    fn ud(&self) -> rdma_ud_param {
        // SAFETY: the UD member of an ESTABLISHED event of the UDP port space.
        unsafe { self.get().param.ud }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: acknowledged once.
        unsafe { rdma_ack_cm_event(self.0.as_ptr()) };
    }
}

/// An event channel of the UDP port space and its identifiers, destroyed
/// with it (identifiers first: their events are acknowledged by then).
struct Channel {
    raw: NonNull<rdma_event_channel>,
    ids: Vec<NonNull<rdma_cm_id>>,
}

impl Drop for Channel {
    fn drop(&mut self) {
        // SAFETY: created here, destroyed once; no event of them is held.
        unsafe {
            for id in self.ids.drain(..).rev() {
                rdma_destroy_id(id.as_ptr());
            }
            rdma_destroy_event_channel(self.raw.as_ptr());
        }
    }
}

fn sockaddr(addr: SocketAddr) -> SockaddrStorage {
    SockaddrStorage::from(addr)
}

impl Channel {
    fn new() -> anyhow::Result<Channel> {
        // SAFETY: plain constructor; null on failure.
        let raw = NonNull::new(unsafe { rdma_create_event_channel() })
            .ok_or_else(|| os_failed("creating the rdma_cm event channel"))?;
        let channel = Channel {
            raw,
            ids: Vec::new(),
        };
        // Polled with a deadline: a blocking read could wait for ever.
        // SAFETY: the channel's own descriptor.
        let fd = unsafe { raw.as_ref().fd };
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(os_failed("polling the rdma_cm event channel"));
        }
        Ok(channel)
    }

    /// A new identifier of the UDP port space, destroyed with the channel.
    fn create_id(&mut self) -> anyhow::Result<*mut rdma_cm_id> {
        let mut id = std::ptr::null_mut();
        // SAFETY: `id` receives the new identifier.
        let rc = unsafe {
            rdma_create_id(
                self.raw.as_ptr(),
                &mut id,
                std::ptr::null_mut(),
                rdma_port_space::RDMA_PS_UDP,
            )
        };
        check(rc, "creating an rdma_cm identifier (UDP port space)")?;
        self.keep(id);
        Ok(id)
    }

    fn keep(&mut self, id: *mut rdma_cm_id) {
        self.ids.extend(NonNull::new(id));
    }

    /// The next event of `id` (a connection request when None), or None
    /// once `deadline` passed.
    fn wait(
        &mut self,
        id: Option<*mut rdma_cm_id>,
        deadline: Instant,
    ) -> anyhow::Result<Option<Event>> {
        let mut pause = ARRIVAL_POLL_MIN;
        loop {
            let mut raw = std::ptr::null_mut();
            // SAFETY: `raw` receives an event to acknowledge.
            if unsafe { rdma_get_cm_event(self.raw.as_ptr(), &mut raw) } == 0 {
                let event = Event(NonNull::new(raw).expect("librdmacm returned an event"));
                let e = event.get();
                match id {
                    Some(id) if e.id == id => return Ok(Some(event)),
                    None if e.event == E::RDMA_CM_EVENT_CONNECT_REQUEST => {
                        self.keep(e.id);
                        return Ok(Some(event));
                    }
                    // An earlier attempt's late answer.
                    _ => {}
                }
                continue;
            }
            let errno = std::io::Error::last_os_error();
            if errno.kind() != std::io::ErrorKind::WouldBlock {
                return Err(failed("reading the rdma_cm event channel", &errno));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(ARRIVAL_POLL_MAX);
        }
    }
}

/// The Q_Key rdma_cm gives `id`, once the device and port it chose are
/// checked to be this side's `port`.
fn checked_qkey(id: *mut rdma_cm_id, port: &Port, step: &str) -> anyhow::Result<u32> {
    // SAFETY: a live identifier bound to a device (resolved or requested).
    let (verbs, port_num) = unsafe { ((*id).verbs, (*id).port_num) };
    if verbs.is_null() {
        bail!("rdma_cm bound {step} to no RDMA device");
    }
    // SAFETY: the device's name, a C string librdmacm keeps.
    let device = unsafe { CStr::from_ptr(ibv_get_device_name((*verbs).device)) };
    // SAFETY: plain data; all-zero is its empty value.
    let mut attr: ibv_qp_attr = unsafe { std::mem::zeroed() };
    attr.qp_state = ibv_qp_state::IBV_QPS_INIT;
    let mut mask = 0;
    // SAFETY: `attr` and `mask` receive the INIT attributes.
    let rc = unsafe { rdma_init_qp_attr(id, &mut attr, &mut mask) };
    check(rc, &format!("rdma_init_qp_attr(INIT) for {step}"))?;
    check_device(&device.to_string_lossy(), port_num, port, step)?;
    Ok(attr.qkey)
}

/// rdma_connect or rdma_accept.
type Offer = unsafe extern "C" fn(*mut rdma_cm_id, *mut rdma_conn_param) -> i32;

/// rdma_cm's Q_Key for `id` (checked on this side's `port`), after `offer`
/// (named `what`) offered QP `qpn` to the peer.
fn offer(
    id: *mut rdma_cm_id,
    port: &Port,
    qpn: u32,
    step: &str,
    (offer, what): (Offer, &str),
) -> anyhow::Result<u32> {
    let qkey = checked_qkey(id, port, step)?;
    // SAFETY: plain data; all-zero is its empty value.
    let mut param: rdma_conn_param = unsafe { std::mem::zeroed() };
    param.qp_num = qpn;
    // SAFETY: a routed or requested identifier; `param` outlives the call.
    check(
        unsafe { offer(id, &mut param) },
        &format!("{what} for {step}"),
    )?;
    Ok(qkey)
}

/// -R with UD: every QP of `endpoint` to the peer's, one SIDR exchange each,
/// in order, on `cm`'s port of the UDP port space.
pub fn connect_qps(
    cm: &Cm,
    port: &Port,
    endpoint: &mut Endpoint,
    plan: &Plan,
    peer: &Hello,
) -> anyhow::Result<()> {
    let mut channel = Channel::new()?;
    let count = endpoint.qps.len();
    let server = cm.server;
    if server.is_none() {
        listen(&mut channel, cm.port, plan.path.source_ip())?;
    }
    for (i, remote) in peer.qps.iter().enumerate().take(count) {
        let step = format!("the rdma_cm (UD) exchange of QP {i} (of {count})");
        let qpn = endpoint.qps[i].qpn();
        match server {
            Some(server) => {
                let (qkey, ud) = connect(&mut channel, cm, server, qpn, port, &step)?;
                if ud.qp_num != remote.qpn {
                    bail!(
                        "rdma_cm answered {step} with QP 0x{:x}, but the peer's details name QP 0x{:x}: another server on the port? (see the peer's output)",
                        ud.qp_num,
                        remote.qpn
                    );
                }
                let mut ah = ud.ah_attr;
                endpoint.ready_ud(i, qkey, |pd| {
                    ud::create(pd, &mut ah, (ud.qp_num, ud.qkey), &cm.peer)
                })?;
            }
            None => {
                let qkey = accept(&mut channel, cm, qpn, port, &step)?;
                let r = route(&plan.path, i);
                endpoint.ready_ud(i, qkey, |pd| {
                    ud::dest(pd, port, peer, (remote.qpn, qkey), r)
                })?;
            }
        }
    }
    Ok(())
}

/// The server's listener on `port` (of `source` alone with --bind_source_ip).
fn listen(channel: &mut Channel, port: u16, source: Option<IpAddr>) -> anyhow::Result<()> {
    let id = channel.create_id()?;
    let ip = source.unwrap_or(IpAddr::from([0, 0, 0, 0]));
    let addr = sockaddr(SocketAddr::new(ip, port));
    // SAFETY: a live identifier; the address outlives the call.
    let rc = unsafe { rdma_bind_addr(id, addr.as_ptr() as *mut _) };
    check(rc, &format!("binding rdma_cm UDP port {port}")).map_err(|e| {
        anyhow!("{e:#} (another server running? choose another with -p on both sides)")
    })?;
    // SAFETY: a bound identifier.
    check(
        unsafe { rdma_listen(id, BACKLOG) },
        &format!("listening on rdma_cm UDP port {port}"),
    )
}

/// Server: answers the next request with QP `qpn`; rdma_cm's Q_Key.
fn accept(
    channel: &mut Channel,
    cm: &Cm,
    qpn: u32,
    port: &Port,
    step: &str,
) -> anyhow::Result<u32> {
    let deadline = Instant::now() + cm.timeout;
    let Some(event) = channel.wait(None, deadline)? else {
        bail!(
            "{} did not start {step} within {} s (raise --timeout if it is slow)",
            cm.peer,
            cm.timeout.as_secs()
        );
    };
    offer(
        event.get().id,
        port,
        qpn,
        step,
        (rdma_accept, "rdma_accept"),
    )
}

/// Client: the SIDR exchange for QP `qpn`, retried while the server is not
/// listening yet, for at most the --timeout; rdma_cm's Q_Key and the
/// server's UD parameters.
fn connect(
    channel: &mut Channel,
    cm: &Cm,
    server: SocketAddr,
    qpn: u32,
    port: &Port,
    step: &str,
) -> anyhow::Result<(u32, rdma_ud_param)> {
    let deadline = Instant::now() + cm.timeout;
    loop {
        let id = channel.create_id()?;
        let last = match attempt(channel, cm, id, server, qpn, port, step, deadline)? {
            Ok(answer) => return Ok(answer),
            Err(last) => last,
        };
        if Instant::now() >= deadline {
            bail!(
                "no rdma_cm server answered {step} at {server} within {} s ({last}): check that the server runs the same command with -c UD, or raise --timeout",
                cm.timeout.as_secs()
            );
        }
        std::thread::sleep(RETRY_PAUSE);
    }
}

/// One attempt: the answer, or why to try again.
#[allow(clippy::too_many_arguments)]
fn attempt(
    channel: &mut Channel,
    cm: &Cm,
    id: *mut rdma_cm_id,
    server: SocketAddr,
    qpn: u32,
    port: &Port,
    step: &str,
    deadline: Instant,
) -> anyhow::Result<Result<(u32, rdma_ud_param), NoAnswer>> {
    let mut answer = |phase: &str, want: E::Type| -> anyhow::Result<Result<Event, NoAnswer>> {
        let Some(event) = channel.wait(Some(id), deadline)? else {
            return Ok(Err(NoAnswer(format!("no answer to {phase}"))));
        };
        let e = event.get();
        Ok(if e.event == want {
            Ok(event)
        } else {
            Err(NoAnswer(format!(
                "{phase}: rdma_cm {:?}, status {}",
                EventType::from(e.event),
                e.status
            )))
        })
    };
    let dst = sockaddr(server);
    let mut src = cm.source.map(sockaddr);
    let src_ptr = src
        .as_mut()
        .map_or(std::ptr::null_mut(), |s| s.as_ptr() as *mut _);
    let timeout_ms = RESOLVE_TIMEOUT.as_millis() as i32;
    // SAFETY: a live identifier; the addresses outlive the call.
    let rc = unsafe { rdma_resolve_addr(id, src_ptr, dst.as_ptr() as *mut _, timeout_ms) };
    check(rc, &format!("resolving {server} (rdma_resolve_addr)"))?;
    if let Err(why) = answer("the address resolution", E::RDMA_CM_EVENT_ADDR_RESOLVED)? {
        return Ok(Err(why));
    }
    // SAFETY: a resolved identifier.
    let rc = unsafe { rdma_resolve_route(id, timeout_ms) };
    check(rc, &format!("resolving the route to {server}"))?;
    if let Err(why) = answer("the route resolution", E::RDMA_CM_EVENT_ROUTE_RESOLVED)? {
        return Ok(Err(why));
    }
    let qkey = offer(id, port, qpn, step, (rdma_connect, "rdma_connect"))?;
    Ok(answer("the SIDR request", E::RDMA_CM_EVENT_ESTABLISHED)?.map(|e| (qkey, e.ud())))
}
