#include "rendezvous/client.h"
