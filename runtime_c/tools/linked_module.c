/*
 * rxe_linked_module (relax_edge/linked_module.h): the model a runner or a
 * server compiled without -DRXE_MODULE serves. Compile this file with
 * -DRXE_MODULE=<prefix>_module and link it beside them.
 */
#include "relax_edge/linked_module.h"

#ifndef RXE_MODULE
#error "compile with -DRXE_MODULE=<prefix>_module"
#endif

const rxe_module_t* const rxe_linked_module = &RXE_MODULE;
