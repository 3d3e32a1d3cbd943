//! One of the client's shared connections, lent to one caller at a time: [`Shared`].
//!
//! Callers of one purpose to one broker queue for its link (one request in flight per
//! connection). A plain mutex would make that queue unbounded: a coordinator lookup behind
//! another's, a Metadata request behind a CreateTopics the controller holds, would wait for the
//! whole of the other request, whatever its own caller's timeout. Here the wait ends at the
//! waiting caller's deadline.

use std::ops::{Deref, DerefMut};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// A value lent out to one borrower at a time, waited for until a deadline.
#[derive(Debug)]
pub(crate) struct Shared<T> {
    /// `None` while lent out.
    slot: Mutex<Option<T>>,
    returned: Condvar,
}

/// The borrowed value; given back (and the next waiter woken) when dropped, also on a panic.
#[derive(Debug)]
pub(crate) struct Lease<'a, T> {
    home: &'a Shared<T>,
    value: Option<T>,
}

impl<T> Shared<T> {
    pub(crate) fn new(value: T) -> Self {
        Shared {
            slot: Mutex::new(Some(value)),
            returned: Condvar::new(),
        }
    }

    /// The poison flag is noise: the slot is only ever taken or refilled whole.
    fn slot(&self) -> MutexGuard<'_, Option<T>> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The value, once the borrower before is done with it, waiting no later than `deadline`;
    /// `None` if it is still lent out then.
    pub(crate) fn take_by(&self, deadline: Instant) -> Option<Lease<'_, T>> {
        let mut slot = self.slot();
        loop {
            if let Some(value) = slot.take() {
                return Some(Lease {
                    home: self,
                    value: Some(value),
                });
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            if left.is_zero() {
                return None;
            }
            slot = match self.returned.wait_timeout(slot, left) {
                Ok((s, _)) => s,
                Err(p) => p.into_inner().0,
            };
        }
    }

    /// The value if nobody holds it now.
    pub(crate) fn try_take(&self) -> Option<Lease<'_, T>> {
        let value = self.slot().take()?;
        Some(Lease {
            home: self,
            value: Some(value),
        })
    }
}

impl<T> Drop for Lease<'_, T> {
    fn drop(&mut self) {
        if let Some(v) = self.value.take() {
            *self.home.slot() = Some(v);
            self.home.returned.notify_one();
        }
    }
}

impl<T> Deref for Lease<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // Only `Drop` empties it.
        self.value
            .as_ref()
            .unwrap_or_else(|| unreachable!("a lease holds its value until dropped"))
    }
}

impl<T> DerefMut for Lease<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value
            .as_mut()
            .unwrap_or_else(|| unreachable!("a lease holds its value until dropped"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_waiter_gives_up_at_its_own_deadline_while_another_holds_the_value() {
        let shared = Arc::new(Shared::new(0u32));
        let held = shared.take_by(Instant::now()).unwrap();
        assert!(shared.try_take().is_none());
        let waiter = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let t = Instant::now();
                let got = shared.take_by(t + Duration::from_millis(200)).is_some();
                (got, t.elapsed())
            })
        };
        let (got, waited) = waiter.join().unwrap();
        assert!(!got);
        assert!(waited >= Duration::from_millis(200), "{waited:?}");
        drop(held);
        // Given back: the next borrower gets it, with what the last one left.
        *shared.take_by(Instant::now()).unwrap() += 1;
        assert_eq!(*shared.try_take().unwrap(), 1);
    }

    #[test]
    fn a_waiter_gets_the_value_as_soon_as_it_is_given_back() {
        let shared = Arc::new(Shared::new(String::new()));
        let mut held = shared.take_by(Instant::now()).unwrap();
        let waiter = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                // A deadline far off: only the hand-over can end this wait.
                let lease = shared.take_by(Instant::now() + Duration::from_secs(3600));
                lease.map(|l| l.clone())
            })
        };
        held.push_str("first");
        drop(held);
        assert_eq!(waiter.join().unwrap().as_deref(), Some("first"));
    }

    #[test]
    fn a_deadline_already_past_fails_without_waiting_but_a_free_value_is_still_lent() {
        let shared = Shared::new(());
        let past = Instant::now() - Duration::from_secs(1);
        let held = shared.take_by(past);
        assert!(held.is_some());
        assert!(shared.take_by(past).is_none());
    }
}
