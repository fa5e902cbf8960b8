package io.nvdepot;

/**
 * Every error nvdepot reports: a stable code (as the C API's {@code NVDEPOT_*}
 * constants) with its name, and a message with the numbers needed to act on it.
 * Unchecked, as the JDK's own storage APIs' runtime failures are; catch it where
 * a store's failure can be handled.
 */
public class NvdepotException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** A bad argument: an unknown option, a value it does not take. */
    public static final int INVALID_ARGUMENT = 10;
    public static final int KEY_TOO_LARGE = 11;
    public static final int VALUE_TOO_LARGE = 12;
    public static final int STORE_FULL = 13;
    public static final int IO = 14;
    public static final int CORRUPT = 15;
    public static final int DAMAGED = 16;
    public static final int FORMAT_VERSION = 17;
    public static final int NOT_A_STORE = 18;
    public static final int NO_SUCH_NAMESPACE = 19;
    public static final int NAMESPACE_EXISTS = 20;
    public static final int CONFIG = 21;
    public static final int UNUSABLE = 22;
    public static final int BUSY = 23;
    public static final int CLOSED = 24;
    public static final int INTERNAL = 99;

    private final int code;
    private final String codeName;

    public NvdepotException(int code, String codeName, String message) {
        super(codeName + ": " + message);
        this.code = code;
        this.codeName = codeName;
    }

    /** The code, one of the constants above. */
    public int code() {
        return code;
    }

    /** The code's name, such as {@code "NOT_A_STORE"}. */
    public String codeName() {
        return codeName;
    }
}
