//! `warden policy export` and `warden policy import` end to end.
