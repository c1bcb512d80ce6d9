//! The exec gate: what makes EXEC atomic across worker threads.
//!
//! Each worker holds its own [`Gate`] while it executes the requests of one read from a
//! connection (a batch), so the lock is taken and released once per batch, not per command,
//! and nobody else ever wants it except an EXEC. An EXEC ([`Exclusive::enter`]) releases its
//! own worker's gate, takes the global exec mutex, then takes every worker's gate in index
//! order (its own included): once it holds them all, no worker is in the middle of a batch,
//! and none starts one until the EXEC is done. Releasing its own gate first is what keeps two
//! EXECs on different workers from deadlocking (each would otherwise hold its own gate and
//! wait for the other's); the exec mutex keeps gate acquisition in one order.
//!
//! What the gate does not exclude: local processes attached to the same shared-memory
//! segment (the Rust crate, the Python package) and the server's background expiry thread
//! run engine operations without it. Each engine operation is still atomic on its own, but
//! a local writer may change a key between two commands of an EXEC.
//!
//! A gate is a flag under a mutex plus a condition variable that is signalled only when
//! someone waits, so the uncontended lock/unlock of a batch is two short mutex sections on a
//! cache line the worker owns — no system call.

use std::sync::{Condvar, Mutex, MutexGuard};

#[derive(Default)]
struct State {
    held: bool,
    waiters: u32,
}

/// One worker's gate (cache-line aligned: each worker takes its own on every batch).
#[derive(Default)]
#[repr(align(64))]
pub struct Gate {
    state: Mutex<State>,
    cv: Condvar,
}

impl Gate {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the gate, waiting while someone else holds it.
    pub fn lock(&self) {
        let mut s = self.state();
        if s.held {
            s.waiters += 1;
            while s.held {
                s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            s.waiters -= 1;
        }
        s.held = true;
    }

    /// Releases the gate (the caller holds it).
    pub fn unlock(&self) {
        let mut s = self.state();
        s.held = false;
        let wake = s.waiters > 0;
        drop(s);
        if wake {
            self.cv.notify_all();
        }
    }

    /// Takes the gate for the lifetime of the guard.
    pub fn hold(&self) -> GateGuard<'_> {
        self.lock();
        GateGuard(self)
    }
}

/// Holds a gate; releases it when dropped.
pub struct GateGuard<'a>(&'a Gate);

impl Drop for GateGuard<'_> {
    fn drop(&mut self) {
        self.0.unlock();
    }
}

/// Every worker's gate held at once (an EXEC running). Created by a worker that holds its
/// own gate; when dropped, every gate but that worker's own is released, so the worker goes
/// on holding its own, as it did before.
pub struct Exclusive<'a> {
    gates: &'a [Gate],
    own: usize,
    _exec: MutexGuard<'a, ()>,
}

impl<'a> Exclusive<'a> {
    pub fn enter(gates: &'a [Gate], exec: &'a Mutex<()>, own: usize) -> Exclusive<'a> {
        gates[own].unlock();
        let guard = exec.lock().unwrap_or_else(|e| e.into_inner());
        for g in gates {
            g.lock();
        }
        Exclusive { gates, own, _exec: guard }
    }
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        for (i, g) in self.gates.iter().enumerate() {
            if i != self.own {
                g.unlock();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// Two "workers" each run batches of two increments under their own gate, and
    /// occasionally an exclusive section that checks the pair is equal: it never sees a
    /// half-done batch of the other worker, and nothing deadlocks.
    #[test]
    fn exclusive_excludes_every_batch() {
        let gates: Arc<Vec<Gate>> = Arc::new((0..2).map(|_| Gate::default()).collect());
        let exec = Arc::new(Mutex::new(()));
        let a = Arc::new(AtomicU64::new(0));
        let b = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..2)
            .map(|w| {
                let (gates, exec, a, b) = (gates.clone(), exec.clone(), a.clone(), b.clone());
                std::thread::spawn(move || {
                    for n in 0..20_000u32 {
                        let _g = gates[w].hold();
                        a.fetch_add(1, Ordering::SeqCst);
                        std::hint::spin_loop();
                        b.fetch_add(1, Ordering::SeqCst);
                        if n % 100 == 0 {
                            let _x = Exclusive::enter(&gates, &exec, w);
                            let (x, y) = (a.load(Ordering::SeqCst), b.load(Ordering::SeqCst));
                            assert_eq!(x, y);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(a.load(Ordering::SeqCst), 40_000);
    }
}
