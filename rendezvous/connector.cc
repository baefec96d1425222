#include "rendezvous/connector.h"
