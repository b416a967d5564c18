//! The shell splitter through the library: the shared shell corpus, adversarial cases and
//! properties (issue 4).
