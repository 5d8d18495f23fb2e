/*
 * fint_2_int.h -- stand-in for the Open MPI header that Debian's
 * libopenmpi-dev does not ship although ompi/op/op.h includes it.  configure
 * puts this folder on the include path only when the real header is
 * missing.  op.h needs just the two scalar conversions below; gpuring uses
 * no Fortran interface.
 */
#ifndef GPURING_COMPAT_FINT_2_INT_H
#define GPURING_COMPAT_FINT_2_INT_H

#define OMPI_FINT_2_INT(a) ((int)(a))
#define OMPI_INT_2_FINT(a) ((MPI_Fint)(a))

#endif
