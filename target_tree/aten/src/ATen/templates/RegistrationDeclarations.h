// Every native function a backend may register a kernel for, with the
// schema string to register it under.

${registration_declarations}
