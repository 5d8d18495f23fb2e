# known_ompi_bugs.sh -- sourced (sh or bash) by the test drivers that run
# allreduce_check through the component below gpuring: the type:op pairs
# where Open MPI 4.1.4 itself gives wrong results (not gpuring), for
# allreduce_check -x "$KNOWN_OMPI_BUGS".
#  - op/avx sums 8- and 16-bit integers with saturating adds
#    (_mm*_adds_epu8/16, _mm*_adds_epi8/16), so MPI_SUM on unsigned char/short
#    gives 0xff/0xffff on wrap, on signed char/short the type's max or min,
#    from count ~16 up -- MPI_CHAR and Fortran's INTEGER*1/2 too
#    (open-mpi/ompi#8045 family);
#  - MPI_UNSIGNED_LONG MIN/MAX compare as signed long (open-mpi/ompi#10525,
#    #10648; fixed after 4.1.4);
#  - MPI_OFFSET MIN/MAX are wrong for negative values (seen here with plain
#    Open MPI: allreduce_check -t offset -o min,max under --mca coll ^gpuring).
KNOWN_OMPI_BUGS="uchar:sum,uint8:sum,ushort:sum,uint16:sum,schar:sum,int8:sum,char:sum,finteger1:sum,short:sum,int16:sum,finteger2:sum,ulong:min,ulong:max,offset:min,offset:max"
