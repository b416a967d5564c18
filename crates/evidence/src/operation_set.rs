//! The set of a chain's closed operations, which grows with the chain and is checked on every
//! record: it must never stop an append for long.

use std::fmt;
use std::hash::BuildHasher;

use foldhash::HashSet;
use warden_contracts::OperationId;

/// How many ids the set holds in one table before it spreads them over [`SHARDS`].
const SMALL: usize = 4096;
/// How many tables a large set spreads its ids over.
const SHARDS: usize = 64;

/// A set of operation ids that never rehashes more than a 64th of itself at once.
///
/// One hash table doubling under a chain's lock copied every id it held: on a chain of a million
/// records (a quarter of a million operations) that stopped one append for 65–90 ms. Up to 4,096
/// ids live in one table; past that they are spread over 64 tables by their hash, so a table
/// that grows holds a 64th of them. An id is hashed twice (once to pick its table); the order of
/// [`OperationSet::iter`] is unspecified.
///
/// ```
/// use warden_contracts::OperationId;
/// use warden_evidence::OperationSet;
///
/// let mut closed = OperationSet::default();
/// let op = OperationId::new("op-1").unwrap();
/// assert!(closed.insert(op.clone()));
/// assert!(!closed.insert(op.clone()));
/// assert!(closed.contains(&op));
/// assert_eq!(closed.len(), 1);
/// ```
#[derive(Clone, Default)]
pub struct OperationSet {
    /// Every id while the set is small.
    small: HashSet<OperationId>,
    /// Every id once it is large (`small` is then empty).
    shards: Option<Box<Shards>>,
}

#[derive(Clone)]
struct Shards {
    /// Picks an id's table (seeded per set, so no one can aim every id at one table).
    pick: foldhash::fast::RandomState,
    tables: [HashSet<OperationId>; SHARDS],
    len: usize,
}

impl Shards {
    fn table(&self, op: &OperationId) -> usize {
        // The top bits: the tables' own hashes use the low ones.
        (self.pick.hash_one(op) >> (64 - SHARDS.trailing_zeros())) as usize
    }
}

impl OperationSet {
    /// Whether `op` is in the set.
    pub fn contains(&self, op: &OperationId) -> bool {
        match &self.shards {
            None => self.small.contains(op),
            Some(s) => s.tables[s.table(op)].contains(op),
        }
    }

    /// Adds `op`; `false` if it was there already.
    pub fn insert(&mut self, op: OperationId) -> bool {
        if self.shards.is_none() && self.small.len() >= SMALL && !self.small.contains(&op) {
            self.spread();
        }
        match &mut self.shards {
            None => self.small.insert(op),
            Some(s) => {
                let t = s.table(&op);
                let added = s.tables[t].insert(op);
                s.len += usize::from(added);
                added
            }
        }
    }

    /// How many ids the set holds.
    pub fn len(&self) -> usize {
        self.shards.as_ref().map_or(self.small.len(), |s| s.len)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every id, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &OperationId> {
        let tables = self.shards.iter().flat_map(|s| s.tables.iter().flatten());
        self.small.iter().chain(tables)
    }

    /// Moves the ids of the single table into the shards (once, when it is full).
    fn spread(&mut self) {
        let mut s = Box::new(Shards {
            pick: foldhash::fast::RandomState::default(),
            tables: std::array::from_fn(|_| HashSet::default()),
            len: 0,
        });
        for op in std::mem::take(&mut self.small) {
            let t = s.table(&op);
            s.len += usize::from(s.tables[t].insert(op));
        }
        self.shards = Some(s);
    }
}

impl fmt::Debug for OperationSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl PartialEq for OperationSet {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|op| other.contains(op))
    }
}

impl Eq for OperationSet {}

impl FromIterator<OperationId> for OperationSet {
    fn from_iter<I: IntoIterator<Item = OperationId>>(iter: I) -> Self {
        let mut set = Self::default();
        for op in iter {
            set.insert(op);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::*;

    fn op(i: usize) -> OperationId {
        OperationId::new(format!("op-{i}")).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            if std::env::var_os("CI").is_some() { 8 } else { 32 }
        ))]

        /// Small or spread over its tables, the set answers as a plain set does.
        #[test]
        fn it_is_a_set_before_and_after_it_spreads(
            ids in proptest::collection::vec(0usize..12_000, 0..9_000),
            probes in proptest::collection::vec(0usize..12_000, 0..64),
        ) {
            let mut set = OperationSet::default();
            let mut plain = std::collections::HashSet::new();
            for &i in &ids {
                prop_assert_eq!(set.insert(op(i)), plain.insert(i));
            }
            prop_assert_eq!(set.len(), plain.len());
            prop_assert_eq!(set.shards.is_some(), plain.len() > SMALL);
            for &i in probes.iter().chain(&ids) {
                prop_assert_eq!(set.contains(&op(i)), plain.contains(&i));
            }
            let mut listed: Vec<_> = set.iter().cloned().collect();
            listed.sort();
            let mut expected: Vec<_> = plain.iter().map(|&i| op(i)).collect();
            expected.sort();
            prop_assert_eq!(listed, expected);
            prop_assert_eq!(set.clone(), set);
        }
    }
}
