// The toolkit header, for the emulation: see half_types.h.
#include "half_types.h"
