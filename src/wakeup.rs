//! Waking a blocked call from another thread (Java's `KafkaConsumer.wakeup()`).
//!
//! A [`WakeupHandle`] sets a flag and reaches the wait in progress, whatever it is: a
//! channel wait (the heartbeat thread's events), a retry sleep, or a socket read (a JoinGroup
//! the coordinator holds, a Fetch the broker holds for `fetch.max.wait.ms`). Channel waits and
//! sleeps also wait on a wake channel; a socket read is cut short by shutting its socket down
//! ([`Interrupter`]), which is why a socket is only registered for the read itself, and a wait
//! that finds the flag already set does not start at all (the request stays in flight). The
//! flag is consumed by whichever call turns it into [`Error::Wakeup`], so each wakeup is
//! reported once.

use crate::error::{Error, Result};
use crate::net::Interrupter;
use crossbeam_channel::{Receiver, Sender};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What the waking thread and the woken one share.
#[derive(Debug)]
struct Shared {
    pending: AtomicBool,
    /// Holds at most one token: waking twice before anyone waits wakes once.
    wake: Sender<()>,
    /// The socket a read is blocked on right now, if any.
    socket: Mutex<Option<Interrupter>>,
}

fn lock(m: &Mutex<Option<Interrupter>>) -> MutexGuard<'_, Option<Interrupter>> {
    // A panic while holding this lock leaves only an `Option` behind, still valid.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Makes a [`Consumer`](crate::Consumer) or [`GroupMember`](crate::GroupMember) blocked in
/// `poll` (or `join`) on another thread return [`Error::Wakeup`] at once; if no call is
/// blocked, the next one returns it. Java's `KafkaConsumer.wakeup()`, for shutting a server
/// down gracefully: the polling thread sees the error, commits and closes.
///
/// Cheap to clone, `Send` and `Sync`. A wakeup is reported once, whoever calls it how often
/// before; the consumer stays usable afterwards. Nothing fetched is lost: positions only
/// advance when `poll` hands records out.
#[derive(Debug, Clone)]
pub struct WakeupHandle(Arc<Shared>);

impl WakeupHandle {
    /// Wakes the blocked call, or the next one if none is blocked. Java's `wakeup()`.
    pub fn wakeup(&self) {
        self.0.pending.store(true, Ordering::Release);
        let _ = self.0.wake.try_send(());
        if let Some(s) = lock(&self.0.socket).as_ref() {
            s.interrupt();
        }
    }
}

/// What a wait on a channel ended with.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Waited<T> {
    /// A message arrived.
    Got(T),
    /// The deadline passed (or the sender is gone).
    TimedOut,
    /// A wakeup is pending.
    Woken,
}

/// The blocked side: owned by a member (and shared with its consumer), one waiting thread at a
/// time.
#[derive(Debug, Clone)]
pub(crate) struct Wakeup {
    shared: Arc<Shared>,
    woken: Receiver<()>,
}

impl Default for Wakeup {
    fn default() -> Self {
        let (wake, woken) = crossbeam_channel::bounded(1);
        Wakeup {
            shared: Arc::new(Shared {
                pending: AtomicBool::new(false),
                wake,
                socket: Mutex::new(None),
            }),
            woken,
        }
    }
}

impl Wakeup {
    /// A handle for other threads.
    pub(crate) fn handle(&self) -> WakeupHandle {
        WakeupHandle(self.shared.clone())
    }

    pub(crate) fn is_pending(&self) -> bool {
        self.shared.pending.load(Ordering::Acquire)
    }

    /// A pending wakeup as [`Error::Wakeup`], consuming it.
    pub(crate) fn check(&self) -> Result<()> {
        if self.shared.pending.swap(false, Ordering::AcqRel) {
            // A token sent after an earlier check would end the next wait early for nothing.
            while self.woken.try_recv().is_ok() {}
            return Err(Error::Wakeup);
        }
        Ok(())
    }

    /// [`check`](Self::check), unless the call has `news` to hand back first (group events it
    /// already acted on): then the wakeup stays pending for the next call, so that nothing the
    /// caller must see is dropped for it.
    pub(crate) fn check_unless(&self, news: bool) -> Result<()> {
        if news {
            Ok(())
        } else {
            self.check()
        }
    }

    /// Waits for a message on `rx` until `deadline`, or until woken.
    pub(crate) fn recv_deadline<T>(&self, rx: &Receiver<T>, deadline: Instant) -> Waited<T> {
        loop {
            if self.is_pending() {
                return Waited::Woken;
            }
            crossbeam_channel::select! {
                recv(rx) -> m => return m.map_or(Waited::TimedOut, Waited::Got),
                // A token left from a wakeup already reported: wait on.
                recv(self.woken) -> _ => continue,
                default(crate::deadline::left(deadline)) => return Waited::TimedOut,
            }
        }
    }

    /// Sleeps `pause` (a retry backoff) but not past `deadline`, and not once woken; whether the
    /// caller should go on: time is left and no wakeup is pending.
    pub(crate) fn sleep_within(&self, pause: Duration, deadline: Instant) -> bool {
        let until = crate::deadline::at(Instant::now(), pause).min(deadline);
        while !self.is_pending() {
            match self.woken.recv_deadline(until) {
                Ok(()) => continue,
                Err(_) => break,
            }
        }
        !self.is_pending() && Instant::now() < deadline
    }

    /// Runs `read`, a blocking read on the socket `interrupter` shuts down, so that a wakeup
    /// during it cuts it short (the read fails and the connection is broken). `None`, without
    /// running it, when a wakeup is already pending: the request stays in flight, unharmed.
    pub(crate) fn during<T>(&self, interrupter: Option<Interrupter>, read: impl FnOnce() -> T) -> Option<T> {
        if self.is_pending() {
            return None;
        }
        *lock(&self.shared.socket) = interrupter;
        // A wakeup between the check and the registration did not see the socket.
        if self.is_pending() {
            *lock(&self.shared.socket) = None;
            return None;
        }
        let out = read();
        *lock(&self.shared.socket) = None;
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::AtomicUsize;

    const LONG: Duration = Duration::from_secs(30);

    /// Wakes `w` from another thread after a moment; returns its join handle.
    fn wake_soon(w: &Wakeup) -> std::thread::JoinHandle<()> {
        let h = w.handle();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            h.wakeup();
        })
    }

    #[test]
    fn a_wakeup_is_reported_once() {
        let w = Wakeup::default();
        assert!(w.check().is_ok());
        w.handle().wakeup();
        w.handle().wakeup();
        assert!(matches!(w.check(), Err(Error::Wakeup)));
        assert!(w.check().is_ok(), "two wakeups before a check are one");
        // The token of the second wakeup does not end the next wait early.
        let (_tx, rx) = crossbeam_channel::unbounded::<u8>();
        let deadline = crate::deadline::after(Duration::from_millis(30));
        assert_eq!(w.recv_deadline(&rx, deadline), Waited::TimedOut);
        assert!(Instant::now() >= deadline);
    }

    #[test]
    fn news_keeps_the_wakeup_for_the_next_call() {
        let w = Wakeup::default();
        w.handle().wakeup();
        assert!(w.check_unless(true).is_ok());
        assert!(w.is_pending());
        assert!(matches!(w.check_unless(false), Err(Error::Wakeup)));
        assert!(!w.is_pending());
    }

    #[test]
    fn a_channel_wait_ends_when_woken_and_messages_still_arrive() {
        let w = Wakeup::default();
        let (tx, rx) = crossbeam_channel::unbounded();
        let t = wake_soon(&w);
        let start = Instant::now();
        assert_eq!(
            w.recv_deadline(&rx, crate::deadline::after(LONG)),
            Waited::<u8>::Woken
        );
        assert!(start.elapsed() < LONG / 2);
        t.join().unwrap();
        // Pending until checked: another wait returns at once.
        assert_eq!(w.recv_deadline(&rx, crate::deadline::after(LONG)), Waited::Woken);
        w.check().unwrap_err();
        tx.send(7).unwrap();
        assert_eq!(w.recv_deadline(&rx, crate::deadline::after(LONG)), Waited::Got(7));
    }

    #[test]
    fn a_sleep_ends_when_woken() {
        let w = Wakeup::default();
        let t = wake_soon(&w);
        let start = Instant::now();
        assert!(!w.sleep_within(LONG, crate::deadline::after(LONG)));
        assert!(start.elapsed() < LONG / 2);
        t.join().unwrap();
        w.check().unwrap_err();
        assert!(w.sleep_within(Duration::from_millis(1), crate::deadline::after(LONG)));
        assert!(!w.sleep_within(Duration::from_millis(1), Instant::now()));
    }

    #[test]
    fn a_pending_wakeup_skips_the_read() {
        let w = Wakeup::default();
        w.handle().wakeup();
        let runs = AtomicUsize::new(0);
        let interrupted = Arc::new(AtomicBool::new(false));
        let flag = interrupted.clone();
        let i = Interrupter::new(move || flag.store(true, Ordering::Release));
        assert_eq!(w.during(Some(i), || runs.fetch_add(1, Ordering::AcqRel)), None);
        assert_eq!(runs.load(Ordering::Acquire), 0);
        assert!(!interrupted.load(Ordering::Acquire), "the socket is left alone");
        w.check().unwrap_err();
        assert_eq!(w.during(None, || 5), Some(5));
    }

    /// A read blocked on a real socket (a peer that never answers) returns once woken.
    #[test]
    fn a_blocked_socket_read_is_cut_short() {
        use std::io::Read;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let _peer = listener.accept().unwrap();
        stream.set_read_timeout(Some(LONG)).unwrap();
        let w = Wakeup::default();
        let i = Interrupter::socket(stream.try_clone().unwrap());
        let t = wake_soon(&w);
        let start = Instant::now();
        let read = w.during(Some(i), || stream.read(&mut [0; 8]));
        assert!(start.elapsed() < LONG / 2, "{:?}", start.elapsed());
        // Shut down: the read sees the end of the stream (or an error), not data.
        assert!(matches!(read, Some(Ok(0)) | Some(Err(_))), "{read:?}");
        t.join().unwrap();
        assert!(matches!(w.check(), Err(Error::Wakeup)));
        // Unregistered afterwards: a later wakeup touches no socket.
        assert!(lock(&w.shared.socket).is_none());
    }
}
