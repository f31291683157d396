#ifndef GROUPDEFAULTS_CLMDB_SHIM_H
#define GROUPDEFAULTS_CLMDB_SHIM_H

#include <lmdb.h>

#endif
