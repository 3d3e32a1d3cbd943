//! The one way the crate runs a background thread: a [`Worker`] is spawned with a name (and a
//! small stack where the work needs little), told to stop through its [`Stop`], and joined
//! within a bound, by its owner's close or, failing that, its drop.
//!
//! A stop reaches the thread wherever it is: between steps it sees the flag; waiting for its
//! next command or deadline it is woken (the waker its owner gives); blocked on a socket it has
//! registered, the socket is shut down under it. Only a step that nothing from outside can cut
//! short — a name lookup, a TCP connect — is not waited for: the thread finishes it on its own,
//! sees the stop and sends nothing more, and the owner returns at once.

use crate::client::lock;
use crate::net::link::Link;
use crate::net::Interrupter;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a drop waits for a thread whose owner could not close it.
const DROP_BOUND: Duration = Duration::from_secs(1);

/// How a thread is stopped at once, even in the middle of a request.
#[derive(Default)]
pub(crate) struct Stop {
    requested: AtomicBool,
    watched: Mutex<Watched>,
    /// Wakes the thread from its wait for work (a command channel, a condition variable).
    waker: Option<Box<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stop")
            .field("requested", &self.requested())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct Watched {
    socket: Option<Interrupter>,
    uninterruptible: bool,
}

impl Stop {
    /// A stop that also calls `waker` (which must not block), for a thread that waits for
    /// work. The waker must make the wait return even if it runs between the thread's check
    /// of [`requested`](Self::requested) and the start of its wait (e.g. by sending on the
    /// channel it waits on, or notifying under the lock it checks with).
    pub(crate) fn with_waker(waker: impl Fn() + Send + Sync + 'static) -> Stop {
        Stop {
            waker: Some(Box::new(waker)),
            ..Stop::default()
        }
    }

    /// Whether a stop was asked for.
    pub(crate) fn requested(&self) -> bool {
        self.requested.load(Ordering::Acquire)
    }

    /// Runs `step`, which nothing from outside can end early (a name lookup, a TCP connect
    /// bounded only by `socket.connection.setup.timeout.ms`), unless a stop came first (`None`).
    /// A stop that comes during it does not wait for it: the thread is left to finish the step
    /// on its own and then sees the stop before sending anything.
    pub(crate) fn uninterruptible<T>(&self, step: impl FnOnce() -> T) -> Option<T> {
        {
            let mut w = lock(&self.watched);
            if self.requested() {
                return None;
            }
            w.uninterruptible = true;
        }
        let result = step();
        lock(&self.watched).uninterruptible = false;
        Some(result)
    }

    /// Asks the thread to stop, cuts its request in flight short and wakes it; whether the
    /// thread is in an [`uninterruptible`](Self::uninterruptible) step, not worth waiting for.
    pub(crate) fn request(&self) -> bool {
        let uninterruptible = {
            let w = lock(&self.watched);
            self.requested.store(true, Ordering::Release);
            if let Some(s) = w.socket.as_ref() {
                s.interrupt();
            }
            w.uninterruptible
        };
        if let Some(wake) = &self.waker {
            wake();
        }
        uninterruptible
    }

    /// Registers the socket of `conn`, which a request is about to block on (`None` once the
    /// request is over).
    pub(crate) fn watch(&self, conn: Option<&Link>) {
        self.watch_socket(conn.and_then(Link::interrupter));
    }

    /// Registers `socket` (`None`: nothing to cut short).
    pub(crate) fn watch_socket(&self, socket: Option<Interrupter>) {
        let mut w = lock(&self.watched);
        w.socket = socket;
        // A stop that came between the check and the registration still reaches the socket.
        if self.requested() {
            if let Some(s) = w.socket.as_ref() {
                s.interrupt();
            }
        }
    }
}

/// A running background thread, owned by whoever spawned it.
#[derive(Debug)]
pub(crate) struct Worker {
    stop: Arc<Stop>,
    /// Disconnected when the thread has ended (its sender is dropped on exit, panic included).
    done: Receiver<()>,
    thread: Option<JoinHandle<()>>,
    name: String,
}

impl Worker {
    /// Starts `run` on a thread called `name` (`stack`: its stack size, `None` for the
    /// default), stopped through `stop`.
    pub(crate) fn spawn(
        name: String,
        stack: Option<usize>,
        stop: Arc<Stop>,
        run: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<Worker> {
        let (done_tx, done) = crossbeam_channel::bounded::<()>(0);
        let mut builder = std::thread::Builder::new().name(name.clone());
        if let Some(bytes) = stack {
            builder = builder.stack_size(bytes);
        }
        let thread = builder.spawn(move || {
            let _done = done_tx;
            run()
        })?;
        Ok(Worker {
            stop,
            done,
            thread: Some(thread),
            name,
        })
    }

    /// The thread's stop, to ask several threads to stop before waiting for each.
    pub(crate) fn stop(&self) -> &Stop {
        &self.stop
    }

    /// Stops the thread and waits for it, at most `bound`. A request in flight is cut off by
    /// shutting its socket down, so nothing the thread sent is still awaited afterwards; a
    /// thread in an uninterruptible step is not waited for at all.
    pub(crate) fn shutdown(&mut self, bound: Duration) {
        let uninterruptible = self.stop.request();
        let Some(t) = self.thread.take() else { return };
        if uninterruptible {
            log::debug!(
                "{}: in a step nothing can cut short; not waiting for it to stop",
                self.name
            );
            return;
        }
        match self.done.recv_timeout(bound) {
            Err(RecvTimeoutError::Timeout) => {
                log::debug!("{}: still running after {bound:?}; not waiting for it", self.name)
            }
            _ => {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // The owner's close has normally stopped the thread already; this covers an owner
        // whose close could not run.
        self.shutdown(DROP_BOUND);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_stop_wakes_a_thread_waiting_for_work_and_the_shutdown_joins_it() {
        let (tx, rx) = crossbeam_channel::unbounded::<()>();
        let stop = Arc::new(Stop::with_waker(move || {
            let _ = tx.send(());
        }));
        let seen = stop.clone();
        let ended = Arc::new(AtomicBool::new(false));
        let end = ended.clone();
        let mut w = Worker::spawn("test-worker".into(), Some(64 * 1024), stop, move || {
            while !seen.requested() {
                let _ = rx.recv_timeout(Duration::from_secs(3600));
            }
            end.store(true, Ordering::Release);
        })
        .unwrap();
        // A thread left to its hour-long wait would still be running when the bound ends.
        w.shutdown(Duration::from_secs(600));
        assert!(ended.load(Ordering::Acquire), "woken and joined");
    }

    #[test]
    fn a_thread_in_an_uninterruptible_step_is_not_waited_for() {
        let stop = Arc::new(Stop::default());
        let (entered_tx, entered) = crossbeam_channel::bounded::<()>(1);
        let (release_tx, release) = crossbeam_channel::bounded::<()>(1);
        let inner = stop.clone();
        let mut w = Worker::spawn("test-connect".into(), None, stop.clone(), move || {
            inner.uninterruptible(|| {
                let _ = entered_tx.send(());
                let _ = release.recv();
            });
        })
        .unwrap();
        entered.recv().unwrap();
        // The step is still running (its release comes below): the shutdown did not wait for it.
        let t = Instant::now();
        w.shutdown(Duration::from_secs(600));
        assert!(t.elapsed() < crate::deadline::LOAD_MARGIN, "{:?}", t.elapsed());
        assert!(stop.requested());
        // The step ends by itself; a later step sees the stop and does not run.
        release_tx.send(()).unwrap();
        assert!(stop.uninterruptible(|| ()).is_none());
    }

    #[test]
    fn a_stop_before_a_socket_is_watched_still_reaches_it() {
        let stop = Stop::default();
        assert!(!stop.request(), "not in an uninterruptible step");
        assert!(stop.requested());
        let cut = Arc::new(AtomicBool::new(false));
        let flag = cut.clone();
        stop.watch_socket(Some(Interrupter::new(move || {
            flag.store(true, Ordering::Release)
        })));
        assert!(
            cut.load(Ordering::Acquire),
            "the socket registered after the stop is shut down"
        );
    }
}
