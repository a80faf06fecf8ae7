! Mistake: a table of 262144 rows of 64 doubles is written to an HDF5
! dataset one row at a time: each of the rows is its own hyperslab
! selection and its own h5dwrite_f call of 512 bytes (64 doubles).  Every call
! goes through HDF5's selection, type conversion and I/O machinery, for
! half a KiB of data each.
! Fix: one h5dwrite_f of the whole array.  The dataset is the same in both
! modes (contiguous layout, 64 x 262144 doubles, 128 MiB).
! Usage: prog mistake|fixed   (writes rows.h5)
program row_writes
  use hdf5
  implicit none
  integer, parameter :: nrow = 262144, ncol = 64
  real(8), allocatable :: a(:, :)
  character(len=16) :: mode
  integer :: i, j, err
  integer(hid_t) :: file, space, dset, mspace, fspace
  integer(hsize_t) :: dims(2), start(2), cnt(2)

  call get_command_argument(1, mode)
  if (mode /= 'mistake' .and. mode /= 'fixed') then
    write (*, '(a)') 'usage: prog mistake|fixed'
    stop 2
  end if
  ! Fortran is column-major: a(:, j) is one contiguous row of the file
  allocate (a(ncol, nrow))
  do j = 1, nrow
    do i = 1, ncol
      a(i, j) = real(j, 8) + 1.0d-4 * real(i, 8)
    end do
  end do

  call h5open_f(err)
  call h5fcreate_f('rows.h5', H5F_ACC_TRUNC_F, file, err)
  dims = [int(ncol, hsize_t), int(nrow, hsize_t)]
  call h5screate_simple_f(2, dims, space, err)
  call h5dcreate_f(file, 'table', H5T_NATIVE_DOUBLE, space, dset, err)
  if (mode == 'mistake') then
    cnt = [int(ncol, hsize_t), 1_hsize_t]
    call h5screate_simple_f(2, cnt, mspace, err)
    call h5dget_space_f(dset, fspace, err)
    do j = 1, nrow
      start = [0_hsize_t, int(j - 1, hsize_t)]
      call h5sselect_hyperslab_f(fspace, H5S_SELECT_SET_F, start, cnt, err)
      call h5dwrite_f(dset, H5T_NATIVE_DOUBLE, a(:, j), cnt, err, mspace, fspace)
    end do
    call h5sclose_f(fspace, err)
    call h5sclose_f(mspace, err)
  else
    call h5dwrite_f(dset, H5T_NATIVE_DOUBLE, a, dims, err)
  end if
  call h5dclose_f(dset, err)
  call h5sclose_f(space, err)
  call h5fclose_f(file, err)
  call h5close_f(err)
  write (*, '(a,i0,a)') 'wrote ', nrow, ' rows'
end program row_writes
