//! One async lock per key (a wallet, an invoice's settlement), made when first asked for and
//! dropped when its last holder or waiter leaves, so that the map holds only keys in use: a
//! process that settles many invoices over its life does not keep a lock for each of them.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

type Slot = Arc<tokio::sync::Mutex<()>>;

/// Locks by key, held across awaits.
pub struct KeyedLocks<K> {
    slots: Mutex<HashMap<K, Slot>>,
}

impl<K> Default for KeyedLocks<K> {
    fn default() -> Self {
        Self {
            slots: Mutex::new(HashMap::new()),
        }
    }
}

/// Holds the lock of one key; dropping it lets the next waiter in, or forgets the key if none waits
/// (a waiter that gives up, its future dropped, leaves the key to the next holder to forget).
pub struct KeyedGuard<'a, K: Eq + Hash> {
    locks: &'a KeyedLocks<K>,
    key: Option<K>,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl<K: Eq + Hash> KeyedLocks<K> {
    fn slots(&self) -> MutexGuard<'_, HashMap<K, Slot>> {
        // Nothing panics while holding it; should something, the map is still whole.
        self.slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How many keys have a lock now (held or waited for).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots().len()
    }
}

impl<K: Eq + Hash + Clone> KeyedLocks<K> {
    /// Waits for `key`'s lock.
    pub async fn lock(&self, key: K) -> KeyedGuard<'_, K> {
        let slot = self.slots().entry(key.clone()).or_default().clone();
        // Until it holds the lock, this call's clone keeps the slot in the map (see Drop).
        let guard = slot.lock_owned().await;
        KeyedGuard {
            locks: self,
            key: Some(key),
            guard: Some(guard),
        }
    }
}

impl<K: Eq + Hash> Drop for KeyedGuard<'_, K> {
    fn drop(&mut self) {
        let (Some(guard), Some(key)) = (self.guard.take(), self.key.take()) else {
            return;
        };
        let slot = tokio::sync::OwnedMutexGuard::mutex(&guard).clone();
        drop(guard);
        let mut slots = self.locks.slots();
        // The map's clone and `slot`: nobody else holds or waits for it (they take their clone under
        // this same mutex, so none can appear while it is held).
        if Arc::strong_count(&slot) == 2 {
            slots.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn a_key_is_forgotten_once_nobody_holds_or_waits_for_it() {
        let locks = KeyedLocks::<String>::default();
        {
            let _a = locks.lock("invoice-1".into()).await;
            let _b = locks.lock("invoice-2".into()).await;
            assert_eq!(locks.len(), 2);
        }
        assert_eq!(locks.len(), 0, "both keys released: the map is empty again");
    }

    #[tokio::test]
    async fn holders_of_one_key_take_turns_and_the_key_stays_while_someone_waits() {
        let locks = Arc::new(KeyedLocks::<u64>::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (locks, inside, most) = (locks.clone(), inside.clone(), most.clone());
                tokio::spawn(async move {
                    let _held = locks.lock(7).await;
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    // Others wait meanwhile: the key must stay (a waiter holds its slot).
                    assert_eq!(locks.len(), 1);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("a task panicked");
        }
        assert_eq!(
            most.load(Ordering::SeqCst),
            1,
            "never two holders of one key at once"
        );
        assert_eq!(locks.len(), 0);
    }

    #[tokio::test]
    async fn different_keys_do_not_wait_for_each_other() {
        let locks = KeyedLocks::<u64>::default();
        let _one = locks.lock(1).await;
        let two = tokio::time::timeout(Duration::from_secs(5), locks.lock(2)).await;
        assert!(two.is_ok(), "key 2 is free while key 1 is held");
    }
}
