//! Byte-class tests over whole strings, sixteen bytes at a time: the validation of ids and
//! digests, which every record and request runs many times.

/// Whether `ok` holds for every byte of `b`. Each sixteen-byte chunk is tested as a fixed-size
/// array with no early exit inside it, which the compiler turns into vector compares; the last
/// chunk overlaps the ones before. `ok` must be a plain comparison of the byte (no table), or
/// nothing is gained.
#[inline(always)]
pub(crate) fn all(b: &[u8], ok: impl Fn(u8) -> bool + Copy) -> bool {
    #[inline(always)]
    fn chunk_ok(chunk: &[u8], ok: impl Fn(u8) -> bool) -> bool {
        match <&[u8; 16]>::try_from(chunk) {
            Ok(chunk) => chunk.iter().fold(true, |all, &c| all & ok(c)),
            Err(_) => chunk.iter().all(|&c| ok(c)),
        }
    }
    let Some(last) = b.len().checked_sub(16) else {
        return b.iter().all(|&c| ok(c));
    };
    for chunk in b.chunks_exact(16) {
        if !chunk_ok(chunk, ok) {
            return false;
        }
    }
    chunk_ok(&b[last..], ok)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_chunked_test_is_the_byte_test(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            let ok = |c: u8| c.is_ascii_hexdigit();
            prop_assert_eq!(super::all(&b, ok), b.iter().all(|&c| ok(c)));
        }

        #[test]
        fn one_bad_byte_anywhere_is_found(len in 1usize..80, at in 0usize..80, bad in 0u8..0x21) {
            let mut b = vec![b'a'; len];
            b[at % len] = bad;
            prop_assert!(!super::all(&b, |c| c > b' '));
            prop_assert!(super::all(&vec![b'a'; len], |c| c > b' '));
        }
    }
}
