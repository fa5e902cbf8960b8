package io.nvdepot;

/** A value with its version (what conditional writes compare). */
public record Versioned(byte[] value, long version) {}
